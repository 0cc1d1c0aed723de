"""Training batches: B queries, their positives and mined negatives, a positive mask joined on IDs.

The documents of a batch are every example's positives then negatives,
deduplicated by ID in first-seen order. ``positive_mask[i, j]`` is true exactly
when document ``j`` is annotated relevant to query ``i`` (any split) - wherever it
sits in the batch, also as another query's positive or negative. It is never a
diagonal, so shuffling the queries or the documents cannot change its meaning.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass

import torch

from ..core.data import Dataset, positives
from ..core.errors import InputError


@dataclass(frozen=True)
class Example:
    query_id: str
    positives: tuple[str, ...]
    negatives: tuple[str, ...]


@dataclass
class Batch:
    query_ids: list[str]
    doc_ids: list[str]
    positive_mask: torch.Tensor  # B x D bool


def build_examples(dataset: Dataset, records: list[dict], positives_per_query: int, at_least: bool = False,
                   source: str = "negatives.jsonl") -> list[Example]:
    """Join mined records with the dataset's train qrels, checking every query's positives.

    Positives come from ``qrels/train.tsv`` (the file's list must agree with it);
    each query must have exactly ``positives_per_query`` of them (at least, with
    ``at_least``), else one error lists the offenders. Examples are sorted by
    query id, so the data order depends only on the seed.
    """
    kind, n = ("at least" if at_least else "exactly"), positives_per_query
    train = dataset.qrels.get("train", {})
    examples, offenders = [], []
    for record in records:
        qid, line = record.query_id, record.line
        if qid not in train:
            raise InputError(f"query {qid!r} is not a training query", source, line, "query_id")
        pos = tuple(sorted(positives(train[qid])))
        if list(pos) != sorted(record.positives):
            raise InputError(f"positives {sorted(record.positives)} differ from qrels/train.tsv {list(pos)} "
                             "(negatives mined from another dataset version?)", source, line, "positives")
        negatives = tuple(neg.id for neg in record.negatives)
        for did in negatives:
            if did not in dataset.corpus:
                raise InputError(f"unknown document {did!r}", source, line, "negatives")
        if (kind == "exactly" and len(pos) != n) or len(pos) < n:
            offenders.append(f"{qid} has {len(pos)}")
        examples.append(Example(qid, pos, negatives))
    if offenders:
        raise InputError(f"{len(offenders)} training queries do not have {kind} {n} positives "
                         f"(first: {', '.join(offenders[:5])})", source, field="train.positives_per_query")
    if not examples:
        raise InputError("no training example", source)
    return sorted(examples, key=lambda e: e.query_id)


def examples_digest(examples: list[Example]) -> str:
    """sha256 of the examples: the training data's identity in a checkpoint fingerprint."""
    text = json.dumps([[e.query_id, list(e.positives), list(e.negatives)] for e in examples])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_batch(examples: list[Example], relevant: dict[str, set[str]]) -> Batch:
    """Documents = positives + negatives deduplicated by ID; mask by joining IDs with ``relevant``."""
    doc_ids = list(dict.fromkeys(d for e in examples for d in (*e.positives, *e.negatives)))
    query_ids = [e.query_id for e in examples]
    mask = torch.tensor([[d in relevant.get(q, ()) for d in doc_ids] for q in query_ids],
                        dtype=torch.bool).reshape(len(query_ids), len(doc_ids))  # B x D
    for row, example in enumerate(examples):
        # every listed positive sits in the batch and is marked; more may be (relevant docs of others)
        if int(mask[row].sum()) < len(example.positives):
            raise ValueError(f"query {example.query_id!r}: {int(mask[row].sum())} positives marked, "
                             f"expected at least {len(example.positives)} (is it missing from `relevant`?)")
    return Batch(query_ids, doc_ids, mask)


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """The example order of one epoch: a permutation seeded by (seed, epoch) alone."""
    order = list(range(n))
    random.Random(f"{seed}:epoch:{epoch}").shuffle(order)
    return order


def _slices(n: int, batch_size: int, min_size: int) -> list[slice]:
    """Consecutive ``batch_size`` slices of ``n`` positions; a last one under ``min_size`` is dropped (DDP)."""
    return [slice(i, i + batch_size) for i in range(0, n, batch_size) if min(batch_size, n - i) >= min_size]


def epoch_batches(n: int, batch_size: int, seed: int, epoch: int, min_size: int = 1) -> list[list[int]]:
    """Consecutive slices of :func:`epoch_order`; a last batch under ``min_size`` is dropped (DDP)."""
    order = epoch_order(n, seed, epoch)
    return [order[s] for s in _slices(n, batch_size, min_size)]


def batches_per_epoch(n: int, batch_size: int, min_size: int = 1) -> int:
    """``len(epoch_batches(n, batch_size, any seed, any epoch, min_size))``: the count needs no order."""
    return len(_slices(n, batch_size, min_size))

