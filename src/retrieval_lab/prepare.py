"""Stage ``prepare``: split queries into train/val/test and audit the split for leakage.

Datasets that ship their own splits (``qrels/train.tsv`` + ``qrels/test.tsv``, as
BEIR does) keep them. Generated datasets ship ``qrels/all.tsv`` and every query
and document carries ``metadata.family``: whole families are assigned to one
split, so no incident is seen in training and tested again.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from .core.atomic import atomic_path, write_json
from .core.config import PrepareParams
from .core.data import (
    Dataset,
    Qrels,
    empty_documents_note,
    load_dataset,
    positives,
    qrels_splits,
    write_corpus,
    write_qrels,
    write_queries,
)
from .core.errors import InputError

SPLITS = ("train", "val", "test")


class LeakageError(InputError):
    """The split lets information about held-out queries into training."""


def _split_sizes(n: int, params: PrepareParams) -> dict[str, int]:
    total = params.train + params.val + params.test
    if total <= 0 or min(params.train, params.val, params.test) < 0:
        raise InputError("split ratios must be non-negative and not all zero", field="prepare")
    sizes = {s: round(n * getattr(params, s) / total) for s in ("val", "test")}
    for split in ("val", "test"):  # a split asked for gets at least one family
        if getattr(params, split) > 0 and sizes[split] == 0 and n >= 3:
            sizes[split] = 1
    sizes["train"] = n - sizes["val"] - sizes["test"]
    if sizes["train"] <= 0:
        raise InputError(f"{n} families are too few for the split ratios", field="prepare")
    return sizes


def assign_families(families: list[str], params: PrepareParams) -> dict[str, str]:
    """Family -> split: a seeded shuffle of the sorted families, cut by the ratios."""
    order = sorted(families)
    random.Random(params.seed).shuffle(order)
    sizes = _split_sizes(len(order), params)
    assignment, start = {}, 0
    for split in ("test", "val", "train"):
        for family in order[start:start + sizes[split]]:
            assignment[family] = split
        start += sizes[split]
    return assignment


def family_split(dataset: Dataset, params: PrepareParams) -> dict[str, Qrels]:
    judged = dataset.qrels["all"]
    for qid in judged:
        if dataset.queries[qid].family is None:
            raise InputError(f"query {qid!r} has no family: a family split needs one on every judged query",
                             str(dataset.path / "queries.jsonl"), field="metadata.family")
    assignment = assign_families(sorted({dataset.queries[q].family for q in judged}), params)
    splits: dict[str, Qrels] = {s: {} for s in SPLITS}
    for qid in sorted(judged):
        splits[assignment[dataset.queries[qid].family]][qid] = judged[qid]
    return splits


def audit_split(splits: dict[str, Qrels], dataset: Dataset) -> dict:
    """Leakage audit: families per split, and documents relevant to queries of several splits.

    A family in two splits is a leak. So is a document of a training family that
    answers a held-out query (its text would be learned from training pairs).
    """
    family_splits: dict[str, set[str]] = defaultdict(set)
    doc_splits: dict[str, set[str]] = defaultdict(set)
    summary = {}
    for split, qrels in splits.items():
        families = sorted({dataset.queries[q].family for q in qrels if dataset.queries[q].family})
        for family in families:
            family_splits[family].add(split)
        for judged in qrels.values():
            for did in positives(judged):
                doc_splits[did].add(split)
        summary[split] = {
            "queries": len(qrels),
            "families": len(families),
            "family_ids": families,
            "judgments": sum(len(j) for j in qrels.values()),
            "queries_without_positive": sorted(q for q, j in qrels.items() if not positives(j)),
        }
    shared_families = {f: sorted(s) for f, s in sorted(family_splits.items()) if len(s) > 1}
    train_families = {f for f, s in family_splits.items() if "train" in s}
    foreign_positives = sorted(
        did for did, s in doc_splits.items()
        if s - {"train"} and dataset.corpus[did].family in train_families
    )
    heldout_positive_docs = sorted(did for did, s in doc_splits.items() if s - {"train"})
    return {
        "splits": summary,
        "leakage": {
            "families_in_several_splits": shared_families,
            "heldout_positives_from_train_families": foreign_positives,
            "documents_positive_in_several_splits": sorted(d for d, s in doc_splits.items() if len(s) > 1),
            "heldout_positive_documents": len(heldout_positive_docs),
        },
    }


def _check_leakage(audit: dict, path: Path) -> None:
    leak = audit["leakage"]
    if leak["families_in_several_splits"]:
        family, where = next(iter(leak["families_in_several_splits"].items()))
        raise LeakageError(f"family {family!r} appears in splits {where} "
                           f"({len(leak['families_in_several_splits'])} families leak)", str(path),
                           field="metadata.family")
    if audit["mode"] == "family" and leak["heldout_positives_from_train_families"]:
        doc = leak["heldout_positives_from_train_families"][0]
        raise LeakageError(f"document {doc!r} of a training family is a positive of a held-out query",
                           str(path), field="metadata.family")


def prepare(raw_dir: str | Path, out_dir: str | Path, params: PrepareParams,
            log: Callable[[str], None] = print) -> dict:
    """Split ``raw_dir`` and write ``out_dir`` (corpus, queries, qrels per split, split_audit.json).

    ``log`` receives what is reported but not written (documents with no text, which are kept).

    Fails (nothing written) when the audit finds leakage.
    """
    raw_dir = Path(raw_dir)
    given = qrels_splits(raw_dir / "qrels")
    if "train" in given and "test" in given:
        mode = "given"
        dataset = load_dataset(raw_dir, [s for s in SPLITS if s in given])
        splits = {s: dataset.qrels.get(s, {}) for s in SPLITS}
    elif "all" in given:
        mode = "family"
        dataset = load_dataset(raw_dir, ["all"])
        splits = family_split(dataset, params)
    else:
        raise InputError("expected qrels/train.tsv + qrels/test.tsv (given splits) or qrels/all.tsv "
                         f"(family split); found {given or 'none'}", str(raw_dir / "qrels"))
    audit = {"mode": mode, "source": str(raw_dir), "seed": params.seed,
             "ratios": {s: getattr(params, s) for s in SPLITS} if mode == "family" else None}
    audit.update(audit_split(splits, dataset))
    judged = {q for qrels in splits.values() for q in qrels}
    audit["unjudged_queries"] = len(set(dataset.queries) - judged)
    _check_leakage(audit, raw_dir / "queries.jsonl")

    queries = {q: v for q, v in dataset.queries.items() if q in judged}
    with atomic_path(out_dir, is_dir=True) as tmp:
        write_corpus(tmp / "corpus.jsonl", dataset.corpus)
        write_queries(tmp / "queries.jsonl", queries)
        for split in SPLITS:
            write_qrels(tmp / "qrels" / f"{split}.tsv", splits[split])
        write_json(tmp / "split_audit.json", audit)
    note = empty_documents_note(dataset.corpus, consequence="kept")
    if note:
        log(note)
    return audit
