"""Stage ``prepare``: split queries into train/val/test and audit the split for leakage.

Datasets that ship their own splits (``qrels/train.tsv`` + ``qrels/test.tsv``, as
BEIR does) keep them; their validation split is ``qrels/dev.tsv`` (BEIR's name) or
``qrels/val.tsv``, else one carved from train (``prepare.val_from_train``).
Generated datasets ship ``qrels/all.tsv`` and every query and document carries
``metadata.family``: whole families are assigned to one split, so no incident is
seen in training and tested again.

Two outputs, so that no stage upstream of evaluation can read a test label:
the prepared folder (corpus, queries, train and val qrels, ``split.json``) and the
held-out folder (``qrels/test.tsv`` and the full ``split_audit.json``).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from .core.atomic import atomic_path, write_json
from .core.data import (
    SPLIT_FILE,
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
from .core.params import PrepareParams

SPLITS = ("train", "val", "test")
VALIDATION_NAMES = ("dev", "val")  # a given validation split's file stem: BEIR's name, then ours
AUDIT_FILE = "split_audit.json"  # in the held-out folder: the whole audit
TEST_QRELS = "qrels/test.tsv"  # in the held-out folder


class LeakageError(InputError):
    """The split lets information about held-out queries into training."""


def _split_sizes(n: int, params: PrepareParams) -> dict[str, int]:
    total = params.train + params.val + params.test
    if total <= 0:  # each ratio is in [0, 1] (core.params)
        raise InputError("split ratios must not all be zero", field="prepare")
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


def positive_components(qrels: Qrels) -> list[list[str]]:
    """Queries grouped so that no two groups share a positive document (connected components of
    the query-document graph), each group sorted, groups ordered by their first query id."""
    parent: dict[str, str] = {q: q for q in qrels}

    def root(q: str) -> str:
        while parent[q] != q:
            parent[q] = parent[parent[q]]
            q = parent[q]
        return q

    owner: dict[str, str] = {}
    for qid in sorted(qrels):
        for did in sorted(positives(qrels[qid])):
            if did in owner:
                a, b = root(owner[did]), root(qid)
                parent[max(a, b)] = min(a, b)
            else:
                owner[did] = qid
    groups: dict[str, list[str]] = defaultdict(list)
    for qid in sorted(qrels):
        groups[root(qid)].append(qid)
    return sorted(groups.values())


def carve_validation(train: Qrels, params: PrepareParams) -> tuple[Qrels, Qrels]:
    """(remaining train, validation): ``round(val_from_train * len(train))`` queries, at least.

    With ``val_unseen`` whole groups of :func:`positive_components` move, so no remaining
    training query shares a positive with a validation query: validation then measures
    queries about documents training never saw. Otherwise single queries move. Seeded.
    """
    target = round(params.val_from_train * len(train))
    if target == 0:
        return train, {}
    groups = positive_components(train) if params.val_unseen else [[q] for q in sorted(train)]
    random.Random(params.seed).shuffle(groups)
    moved: set[str] = set()
    for group in groups:
        if len(moved) >= target:
            break
        moved.update(group)
    if len(moved) == len(train):
        raise InputError(f"carving {target} validation queries leaves no training query "
                         f"({len(groups)} groups of queries that share positives)", field="prepare.val_from_train")
    return ({q: j for q, j in train.items() if q not in moved}, {q: j for q, j in train.items() if q in moved})


def _training_positives(splits: dict[str, Qrels]) -> set[str]:
    return {d for judged in splits["train"].values() for d in positives(judged)}


def audit_split(splits: dict[str, Qrels], dataset: Dataset) -> dict:
    """Leakage audit: families per split, and documents relevant to queries of several splits.

    A family in two splits is a leak. So is a document of a training family that
    answers a held-out query (its text would be learned from training pairs).
    A held-out query is *seen* when one of its positives is a training positive.
    """
    family_splits: dict[str, set[str]] = defaultdict(set)
    doc_splits: dict[str, set[str]] = defaultdict(set)
    trained = _training_positives(splits)
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
        if split != "train":
            summary[split]["seen_queries"] = sum(bool(positives(j) & trained) for j in qrels.values())
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
            "same_text_in_several_splits": same_text_across_splits(splits, dataset),
            "same_text_in_one_split": same_text_within_splits(splits, dataset),
        },
    }


def same_text_across_splits(splits: dict[str, Qrels], dataset: Dataset) -> list[dict]:
    """Query texts that occur under different ids in different splits: reported, not refused
    (official splits hold a few; whether they are the same question is the user's call)."""
    by_text: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for split, qrels in splits.items():
        for qid in sorted(qrels):
            by_text[" ".join(dataset.queries[qid].text.split()).casefold()][split].append(qid)
    return [{"text": text, "ids": {s: ids for s, ids in where.items()}}
            for text, where in sorted(by_text.items()) if len(where) > 1]


def same_text_within_splits(splits: dict[str, Qrels], dataset: Dataset) -> list[dict]:
    """Query texts under several ids inside one split (each then counts twice in its means): reported."""
    out = []
    for split, qrels in splits.items():
        by_text: dict[str, list[str]] = defaultdict(list)
        for qid in sorted(qrels):
            by_text[" ".join(dataset.queries[qid].text.split()).casefold()].append(qid)
        out += [{"text": text, "split": split, "ids": ids} for text, ids in sorted(by_text.items()) if len(ids) > 1]
    return out


def _refuse_shared_ids(splits: dict[str, Qrels], raw_dir: Path) -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for split in SPLITS:
        for qid in splits[split]:
            where[qid].append(split)
    shared = sorted((q, s) for q, s in where.items() if len(s) > 1)
    if shared:
        shown = ", ".join(f"{q!r} ({' + '.join(s)})" for q, s in shared[:10])
        raise LeakageError(f"{len(shared)} query ids are judged in several splits: {shown}"
                           + (", ..." if len(shared) > 10 else ""), str(raw_dir / "qrels"), field="query-id")


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


def _given_splits(raw_dir: Path, given: list[str], params: PrepareParams) -> tuple[Dataset, dict[str, Qrels], str]:
    """The given train/test splits and their validation split: a given one, or carved from train."""
    named = [name for name in VALIDATION_NAMES if name in given]
    if len(named) > 1:
        raise InputError("both qrels/dev.tsv and qrels/val.tsv: keep the one that is the validation split",
                         str(raw_dir / "qrels"))
    dataset = load_dataset(raw_dir, ["train", "test", *named])
    splits = {"train": dataset.qrels["train"], "val": dataset.qrels[named[0]] if named else {},
              "test": dataset.qrels["test"]}
    _refuse_shared_ids(splits, raw_dir)
    if named:
        return dataset, splits, f"given (qrels/{named[0]}.tsv)"
    training = len(splits["train"])
    splits["train"], splits["val"] = carve_validation(splits["train"], params)
    if not splits["val"]:
        why = ("prepare.val_from_train is 0" if params.val_from_train == 0 else
               f"prepare.val_from_train {params.val_from_train:g} of {training} training queries rounds to 0")
        return dataset, splits, f"none ({why})"
    how = "whole groups of queries sharing positives" if params.val_unseen else "single queries"
    return dataset, splits, f"carved from train: {params.val_from_train:g} of its queries, as {how}"


def _test_only(raw_dir: Path, given: list[str]) -> tuple[Dataset, dict[str, Qrels], str]:
    """Test judgments alone (and a given validation split, if any): an empty training split."""
    named = [name for name in VALIDATION_NAMES if name in given]
    if len(named) > 1:
        raise InputError("both qrels/dev.tsv and qrels/val.tsv: keep the one that is the validation split",
                         str(raw_dir / "qrels"))
    dataset = load_dataset(raw_dir, ["test", *named])
    splits = {"train": {}, "val": dataset.qrels[named[0]] if named else {}, "test": dataset.qrels["test"]}
    _refuse_shared_ids(splits, raw_dir)
    validation = f"given (qrels/{named[0]}.tsv)" if named else "none (no training split: qrels/test.tsv alone)"
    return dataset, splits, validation


def prepare(raw_dir: str | Path, out_dir: str | Path, heldout_dir: str | Path, params: PrepareParams,
            log: Callable[[str], None] = print) -> dict:
    """Split ``raw_dir``; write ``out_dir`` (corpus, queries, train and val qrels, split.json) and
    ``heldout_dir`` (test qrels, split_audit.json). Returns the audit.

    ``log`` receives what is reported but not written to the prepared folder (documents with
    no text, which are kept; query texts shared across splits).

    Fails (nothing written) when the audit finds leakage, or a query id is in two given splits.
    """
    raw_dir = Path(raw_dir)
    given = qrels_splits(raw_dir / "qrels")
    if "train" in given and "test" in given:
        mode = "given"
        dataset, splits, validation = _given_splits(raw_dir, given, params)
    elif "all" in given:
        mode = "family"
        dataset = load_dataset(raw_dir, ["all"])
        splits = family_split(dataset, params)
        validation = "families held out like the test split's (prepare.val)"
    elif "test" in given and "train" not in given:
        # what pooling gives: judgments of test queries only. Evaluation needs nothing more; training,
        # mining and tuning have nothing to learn from, and no query is seen or unseen
        mode = "test_only"
        dataset, splits, validation = _test_only(raw_dir, given)
    else:
        raise InputError("expected qrels/test.tsv (with qrels/train.tsv: given splits), or qrels/all.tsv "
                         f"(family split); found {given or 'none'}", str(raw_dir / "qrels"))
    audit = {"mode": mode, "source": str(raw_dir), "seed": params.seed, "validation": validation,
             "ratios": {s: getattr(params, s) for s in SPLITS} if mode == "family" else None}
    audit.update(audit_split(splits, dataset))
    judged = {q for qrels in splits.values() for q in qrels}
    audit["unjudged_queries"] = len(set(dataset.queries) - judged)
    _check_leakage(audit, raw_dir / "queries.jsonl")

    queries = {q: v for q, v in dataset.queries.items() if q in judged}
    split_note = {"mode": mode, "source": str(raw_dir), "seed": params.seed, "validation": validation,
                  "queries": {s: len(splits[s]) for s in ("train", "val")}}
    with atomic_path(out_dir, is_dir=True) as tmp:
        write_corpus(tmp / "corpus.jsonl", dataset.corpus)
        write_queries(tmp / "queries.jsonl", queries)
        for split in ("train", "val"):
            write_qrels(tmp / "qrels" / f"{split}.tsv", splits[split])
        write_json(tmp / SPLIT_FILE, split_note)
        with atomic_path(heldout_dir, is_dir=True) as held:
            write_qrels(held / TEST_QRELS, splits["test"])
            write_json(held / AUDIT_FILE, audit)
    note = empty_documents_note(dataset.corpus, consequence="kept")
    if note:
        log(note)
    for item in audit["leakage"]["same_text_in_several_splits"]:
        log(f"the same query text under ids {item['ids']}: kept (listed in {AUDIT_FILE})")
    for item in audit["leakage"]["same_text_in_one_split"]:
        log(f"the same query text under ids {item['ids']} in {item['split']}: kept (listed in {AUDIT_FILE})")
    return audit
