"""The judging loop: pool the top of several runs for labelling, then merge the labels into qrels.

``pool``: per query, the union of every run's top ``depth``, minus pairs already
judged, ordered by best rank then doc id; one tsv row per (query, document) with
the text a judge needs and an empty ``score`` column to fill in.

``merge``: read the filled tsv, check every label (file:line), add the new
judgments to the existing qrels. Every row needs a label: a blank one is an error (an
annotator's skipped row would otherwise vanish from the judgments unseen); deleting the
row is how a pair is left unjudged on purpose. Existing judgments are never changed: a label
that contradicts one is an error, as is one pair labelled twice differently.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .core.atomic import atomic_path
from .core.data import Doc, Qrels, Query, ascii_integer, check_id, text_lines
from .core.errors import InputError
from .core.guard import library_output
from .core.kinds import POOL, POOL_COLUMNS
from .runs import Run, ranked

COLUMNS = POOL_COLUMNS  # its header is its signature (core.kinds): a pool replaces only an unlabelled pool
SNIPPET = 300


@dataclass(frozen=True)
class PoolRow:
    query_id: str
    query_text: str
    doc_id: str
    title: str
    snippet: str
    best_rank: int
    retrievers: tuple[str, ...]


def _flat(text: str) -> str:
    """One tsv cell: tabs, newlines and runs of spaces collapsed to one space."""
    return " ".join(text.split())


def pool(runs: dict[str, Run], depth: int, queries: dict[str, Query], corpus: dict[str, Doc],
         judged: Qrels | None = None) -> list[PoolRow]:
    """Rows to judge, queries in ``queries`` order, each ordered by best rank then doc id.

    ``runs`` maps a retriever name (the run file stem) to its run; ``retrievers`` of a
    row lists, sorted, those whose top ``depth`` holds the document.
    """
    if depth < 1:
        raise InputError(f"depth must be positive, got {depth}", field="--depth")
    judged = judged or {}
    for name, run in runs.items():
        unknown = [q for q in run if q not in queries]
        if unknown:
            raise InputError(f"run {name!r} has query {unknown[0]!r} unknown to the dataset "
                             f"({len(unknown)} such)", field="--runs")
    rows = []
    for qid, query in queries.items():
        best: dict[str, int] = {}
        found_by: dict[str, set[str]] = {}
        for name, run in runs.items():
            for rank, (doc, _) in enumerate(ranked(run.get(qid, {}))[:depth], start=1):
                if doc in judged.get(qid, {}):
                    continue
                if doc not in corpus:
                    raise InputError(f"run {name!r} retrieved {doc!r} for {qid!r}, not in the corpus",
                                     field="--runs")
                best[doc] = min(rank, best.get(doc, rank))
                found_by.setdefault(doc, set()).add(name)
        for doc in sorted(best, key=lambda d: (best[d], d)):
            rows.append(PoolRow(qid, _flat(query.text), doc, _flat(corpus[doc].title),
                                _flat(corpus[doc].text)[:SNIPPET], best[doc], tuple(sorted(found_by[doc]))))
    return rows


def write_pool(path: str | Path, rows: list[PoolRow]) -> None:
    """The pool tsv; it replaces only a pool without labels (a labelled one is an annotator's work) —
    :func:`core.guard.library_output`."""
    library_output(path, "write_pool", POOL)
    with atomic_path(path, kind=POOL) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write("\t".join(COLUMNS) + "\n")
        fh.writelines("\t".join([r.query_id, r.query_text, r.doc_id, r.title, r.snippet, str(r.best_rank),
                                ",".join(r.retrievers), ""]) + "\n" for r in rows)


@dataclass
class Labels:
    qrels: Qrels  # labelled pairs
    lines: dict[tuple[str, str], int]  # (query, doc) -> line of its label
    repeated: int  # rows repeating an earlier row's label


def read_labels(path: str | Path, min_label: int = 0, max_label: int = 2,
                queries: dict | None = None, corpus: dict | None = None) -> Labels:
    """Labels from a filled pool tsv; a blank ``score`` is an error (delete the row to leave a pair unjudged).

    The header must name ``query_id``, ``doc_id`` and ``score``; other columns are ignored.
    """
    path = Path(path)
    labels: Qrels = {}
    where: dict[tuple[str, str], int] = {}
    header: list[str] | None = None
    repeated = 0
    for number, line in text_lines(path):
        if not line.strip():
            continue
        cells = line.rstrip("\r\n").split("\t")
        if header is None:
            header = cells
            missing = [c for c in ("query_id", "doc_id", "score") if c not in header]
            if missing:
                raise InputError(f"header lacks column(s) {', '.join(missing)}", str(path), number)
            twice = [c for c in ("query_id", "doc_id", "score") if header.count(c) > 1]
            if twice:  # which one holds the labels? refused, never guessed
                where = [i + 1 for i, c in enumerate(header) if c == twice[0]]
                raise InputError(f"column {twice[0]!r} twice (columns {where[0]} and {where[1]})", str(path), number,
                                 twice[0])
            col = {c: header.index(c) for c in ("query_id", "doc_id", "score")}
            continue
        if len(cells) != len(header):
            raise InputError(f"expected {len(header)} tab-separated columns, got {len(cells)}", str(path), number)
        qid, doc, text = cells[col["query_id"]].strip(), cells[col["doc_id"]].strip(), cells[col["score"]].strip()
        for value, name in ((qid, "query_id"), (doc, "doc_id")):  # the merged qrels must read back
            if not value:
                raise InputError("empty id", str(path), number, name)
            check_id(value, path, number, name)
        if queries is not None and qid not in queries:
            raise InputError(f"unknown query id {qid!r}", str(path), number, "query_id")
        if corpus is not None and doc not in corpus:
            raise InputError(f"unknown document id {doc!r}", str(path), number, "doc_id")
        if not text:
            raise InputError("blank label: fill it in, or delete the row to leave the pair unjudged", str(path),
                             number, "score")
        label = ascii_integer(text)
        if label is None:
            raise InputError(f"label {text!r} is not an integer", str(path), number, "score")
        if not min_label <= label <= max_label:
            raise InputError(f"label {label} outside {min_label}..{max_label}", str(path), number, "score")
        previous = labels.get(qid, {}).get(doc)
        if previous is not None:
            if previous != label:
                raise InputError(f"pair ({qid}, {doc}) labelled {previous} on line {where[qid, doc]} and "
                                 f"{label} here", str(path), number, "score")
            repeated += 1
            continue
        labels.setdefault(qid, {})[doc] = label
        where[qid, doc] = number
    if header is None:
        raise InputError("empty file: no header", str(path))
    return Labels(labels, where, repeated)


def merge(existing: Qrels, labels: Labels, source: str | None = None) -> tuple[Qrels, dict]:
    """Existing judgments plus the new labels; a label contradicting an existing judgment is an error."""
    merged = {qid: dict(judged) for qid, judged in existing.items()}
    added = agreeing = 0
    for qid, judged in labels.qrels.items():
        for doc, label in judged.items():
            old = existing.get(qid, {}).get(doc)
            if old is None:
                merged.setdefault(qid, {})[doc] = label
                added += 1
            elif old == label:
                agreeing += 1
            else:
                raise InputError(f"pair ({qid}, {doc}) is already judged {old}; labelled {label} here",
                                 source, labels.lines.get((qid, doc)), "score")
    return merged, {"labelled": sum(len(v) for v in labels.qrels.values()),
                    "repeated_same_label": labels.repeated, "added": added, "already_judged_same": agreeing,
                    "judgments": sum(len(v) for v in merged.values())}
