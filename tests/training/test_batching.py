"""Batches: the positive mask is joined on IDs, so its meaning survives any order."""

from __future__ import annotations

import random

import pytest
import torch
from beir_fixtures import write_beir

from retrieval_lab.core.data import load_dataset
from retrieval_lab.core.errors import InputError
from retrieval_lab.distributed import shard
from retrieval_lab.losses import multi_positive_nce
from retrieval_lab.negatives import Candidate, MinedQuery
from retrieval_lab.training.batching import (
    Example,
    batches_per_epoch,
    build_examples,
    epoch_batches,
    epoch_order,
    make_batch,
)

# q1 -> a, b ; q2 -> c, d ; q3 -> e, f.  Mined: q1's negative c is q2's positive; q2's negative a is q1's.
EXAMPLES = [Example("q1", ("a", "b"), ("c",)), Example("q2", ("c", "d"), ("a",)), Example("q3", ("e", "f"), ("g",))]
RELEVANT = {"q1": {"a", "b"}, "q2": {"c", "d"}, "q3": {"e", "f", "x"}}  # x: relevant, not in the batch


def _pairs(batch) -> set[tuple[str, str]]:
    return {(batch.query_ids[i], batch.doc_ids[j]) for i, j in batch.positive_mask.nonzero().tolist()}


def test_mask_joins_on_ids():
    batch = make_batch(EXAMPLES, RELEVANT)
    assert batch.doc_ids == ["a", "b", "c", "d", "e", "f", "g"]  # q1: a b c, q2: c d (a), q3: e f g
    # c is q1's negative (a negative column for q1) and q2's positive (a positive column for q2)
    assert batch.positive_mask.tolist() == [
        [True, True, False, False, False, False, False],
        [False, False, True, True, False, False, False],
        [False, False, False, False, True, True, False],
    ]


def test_shuffled_batch_has_the_same_meaning_and_loss():
    embedding = {k: torch.randn(8, generator=torch.Generator().manual_seed(i))
                 for i, k in enumerate(["q1", "q2", "q3", "a", "b", "c", "d", "e", "f", "g"])}

    def loss(batch):
        q = torch.stack([embedding[i] for i in batch.query_ids])  # B x 8
        d = torch.stack([embedding[i] for i in batch.doc_ids])  # D x 8
        return multi_positive_nce(q @ d.T, batch.positive_mask).item()

    reference = make_batch(EXAMPLES, RELEVANT)
    rng, orders = random.Random(0), set()
    for _ in range(5):
        shuffled = [Example(e.query_id, tuple(rng.sample(e.positives, len(e.positives))), e.negatives)
                    for e in rng.sample(EXAMPLES, len(EXAMPLES))]
        batch = make_batch(shuffled, RELEVANT)
        orders.add((tuple(batch.query_ids), tuple(batch.doc_ids)))
        assert _pairs(batch) == _pairs(reference) == {("q1", "a"), ("q1", "b"), ("q2", "c"), ("q2", "d"),
                                                       ("q3", "e"), ("q3", "f")}
        assert loss(batch) == pytest.approx(loss(reference), abs=1e-6)
    assert len(orders) > 1  # the shuffles really produced other row and column orders


def test_document_relevant_in_another_split_is_positive_wherever_it_sits():
    # q3's mined negative is a document annotated relevant to q1 elsewhere (e.g. in another split)
    examples = [Example("q1", ("a",), ("z",)), Example("q3", ("e",), ("y",))]
    batch = make_batch(examples, {"q1": {"a", "y"}, "q3": {"e"}})
    assert _pairs(batch) == {("q1", "a"), ("q1", "y"), ("q3", "e")}
    with pytest.raises(ValueError, match="query 'q1': 0 positives marked, expected at least 1"):
        make_batch(examples, {"q3": {"e"}})


def _dataset(tmp_path, positives_of_q2=("c", "d")):
    corpus = [{"_id": d, "title": "", "text": d} for d in "abcdefg"]
    queries = [{"_id": q, "text": q} for q in ("q1", "q2", "q3")]
    train = [("q1", "a", 1), ("q1", "b", 1), ("q3", "e", 1), ("q3", "f", 1), ("q3", "g", 0)]
    train += [("q2", d, 1) for d in positives_of_q2]
    return load_dataset(write_beir(tmp_path, corpus, queries, {"train": train}))


def _records(**positives):
    default = {"q1": ["a", "b"], "q2": ["c", "d"], "q3": ["e", "f"]}
    default.update(positives)
    negs = {"q1": "c", "q2": "a", "q3": "g"}
    return [MinedQuery(q, tuple(p), None, (Candidate(negs[q], 4, 0.5),), line=i)
            for i, (q, p) in enumerate(default.items(), start=1)]


def test_build_examples_checks_positives_per_query(tmp_path):
    examples = build_examples(_dataset(tmp_path), _records(), 2)
    assert examples == EXAMPLES
    three = _dataset(tmp_path / "three", ("c", "d", "b"))
    assert build_examples(three, _records(q2=["b", "c", "d"]), 1, at_least=True)[1].positives == ("b", "c", "d")
    # q1 and q3 have 2 positives, q2 has 3: "at least 3" leaves out q1 and q3
    with pytest.raises(InputError, match=r"2 training queries do not have at least 3 positives \(first: q1 has 2, q3 has 2\)"):
        build_examples(three, _records(q2=["b", "c", "d"]), 3, at_least=True)
    with pytest.raises(InputError, match=r"1 training queries do not have exactly 2 positives \(first: q2 has 3\)"):
        build_examples(three, _records(q2=["b", "c", "d"]), 2)
    with pytest.raises(InputError, match=r"negatives.jsonl:2 field 'positives'.*differ from qrels/train.tsv"):
        build_examples(three, _records(), 2)
    # a count below 1 never reaches build_examples: the params schema refuses it
    from retrieval_lab.core.params import TrainParams

    with pytest.raises(InputError, match=r"field 'train.positives_per_query': must lie in \[1, inf\), got 0"):
        TrainParams(positives_per_query=0)


def test_epoch_order_and_shards():
    assert epoch_order(10, 42, 0) == epoch_order(10, 42, 0)
    assert epoch_order(10, 42, 0) != epoch_order(10, 42, 1)
    assert sorted(epoch_order(10, 42, 1)) == list(range(10))
    batches = epoch_batches(10, 4, 42, 0)
    assert [len(b) for b in batches] == [4, 4, 2] and [i for b in batches for i in b] == epoch_order(10, 42, 0)
    assert [len(b) for b in epoch_batches(10, 4, 42, 0, min_size=3)] == [4, 4]
    # 7 items on 3 ranks: 3, 2, 2
    assert [shard(7, 3, r) for r in range(3)] == [(0, 3), (3, 5), (5, 7)]
    assert shard(5, 1, 0) == (0, 5)


def test_batches_per_epoch_counts_what_epoch_batches_returns():
    # 10 examples in 4s: slices of 4, 4, 2; the 2 is dropped when at least 3 are needed (DDP on 3 ranks)
    assert batches_per_epoch(10, 4) == 3 and batches_per_epoch(10, 4, min_size=3) == 2
    for n in range(12):
        for size in (1, 3, 4, 5):
            for min_size in (1, 2, 3):
                assert batches_per_epoch(n, size, min_size) == len(epoch_batches(n, size, 7, 1, min_size))
