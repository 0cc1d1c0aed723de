"""TREC runs: the shared currency between retrievers, fusion, mining and evaluation.

A run maps query id -> document id -> score. Order is always recomputed from the
scores with the trec_eval rule (score descending, then document id descending as
strings); a file's rank column is ignored. Runs are written in that order with
strictly decreasing scores, so every reader sees one order.
"""

from __future__ import annotations

import contextlib
import gzip
import math
import operator
from collections.abc import Container
from pathlib import Path

import numpy as np

from .core.atomic import atomic_path
from .core.checks import check_run, positive
from .core.data import columns, id_problem, plain_line, text_lines
from .core.errors import InputError
from .core.guard import RUN, library_output

Run = dict[str, dict[str, float]]


def ranked(scores: dict[str, float]) -> list[tuple[str, float]]:
    """Documents in trec_eval order: score descending, ties by document id descending."""
    return sorted(scores.items(), key=_SCORE_THEN_ID, reverse=True)


_SCORE_THEN_ID = operator.itemgetter(1, 0)  # (score, id) of an item: a lambda's tuple, built in C (2x faster)


_RUN_COLUMNS = {6: ("qid", "Q0", "docid", "rank", "score", "tag")}


def read_run(path: str | Path) -> Run:
    """Read a TREC 6-column run (``qid Q0 docid rank score tag``), checking every line; gzip is read
    transparently (``run.trec.gz``)."""
    run: Run = {}
    for number, line in text_lines(Path(path)):
        if not line.strip():
            continue
        parts = line.split() if plain_line(line) else columns(line, path, number, _RUN_COLUMNS)
        if len(parts) != 6:
            raise InputError(f"expected 6 columns (qid Q0 docid rank score tag), got {len(parts)}",
                             str(path), number)
        qid, _, did, _, score_text, _ = parts
        try:
            if not score_text.isascii() or "_" in score_text:  # float() takes "1_0" and non-ASCII digits
                raise ValueError
            score = float(score_text)
        except ValueError:
            raise InputError(f"score {score_text!r} is not a number", str(path), number, "score") from None
        if math.isnan(score) or math.isinf(score):
            raise InputError(f"score {score_text!r} is not finite", str(path), number, "score")
        docs = run.setdefault(qid, {})
        if did in docs:
            raise InputError(f"document {did!r} repeated for query {qid!r}", str(path), number, "docid")
        docs[did] = score
    return run


def check_documents(run: Run, corpus: Container[str], path: str | Path | None = None) -> None:
    """Refuse a run that ranks a document ``corpus`` lacks (a run made on another collection), naming
    the first such line (or, for a run given as a mapping, its query and document); trec_eval would count
    it as unjudged, but nothing downstream has its text."""
    unknown = sum(did not in corpus for docs in run.values() for did in docs)
    if not unknown:
        return
    if path is None:
        qid, did = next((q, d) for q, docs in run.items() for d in docs if d not in corpus)
        raise InputError(f"document {did!r} is not in the dataset's corpus ({unknown} ranked documents are not): "
                         "was the run made on another collection?", field=f"run[{qid!r}][{did!r}]")
    for number, line in text_lines(Path(path)):  # read again only to name the line
        parts = line.split() if plain_line(line) else columns(line, path, number, _RUN_COLUMNS)
        if len(parts) == 6 and parts[2] not in corpus:
            raise InputError(f"document {parts[2]!r} is not in the dataset's corpus ({unknown} ranked "
                             "documents are not): was the run made on another collection?", str(path), number,
                             "docid")


def _strictly_decreasing(scores: list[float]) -> list[float]:
    # Nudge tied scores down by one ulp at a time: the order is kept, values barely move.
    out: list[float] = []
    for score in map(float, scores):  # a NumPy scalar's repr would be "np.float32(0.9)"
        if out and score >= out[-1]:
            score = float(np.nextafter(out[-1], -np.inf))
        out.append(score)
    return out


def _query_lines(qid: str, docs: dict[str, float], tag: str, depth: int | None) -> str:
    order = ranked(docs)[:depth]
    scores = _strictly_decreasing([s for _, s in order])
    return "".join(f"{qid} Q0 {did} {rank} {score!r} {tag}\n"
                   for rank, ((did, _), score) in enumerate(zip(order, scores), start=1))


def format_run(run: Run, tag: str, depth: int | None = None) -> str:
    return "".join(_query_lines(qid, run[qid], tag, depth) for qid in sorted(run))


def write_run(path: str | Path, run: Run, tag: str, depth: int | None = None) -> None:
    """Write a run atomically, queries sorted, at most ``depth`` documents each, one query at a time.

    A name ending in ``.gz`` is written gzipped (with no timestamp: the same run gives the same bytes).

    Refused, nothing written (:class:`InputError`): a score that is not a finite number (NumPy's are
    numbers), an id a TREC run cannot carry, a ``depth`` below 1, and a ``path`` that would replace an
    input or a file this writer did not write: a run never lies inside a BEIR folder (one holding
    corpus.jsonl and queries.jsonl) and replaces only an earlier run (never corpus.jsonl, queries.jsonl,
    qrels, a pool or a note) — :func:`core.guard.library_output`.
    """
    check_run(run)
    if not isinstance(tag, str) or not tag or id_problem(tag):
        raise InputError(f"run tag {tag!r} must be one non-empty word", field="tag")
    if depth is not None:
        depth = positive(depth, "depth")
    library_output(path, "write_run", RUN)
    with atomic_path(path, kind=RUN) as tmp, open(tmp, "wb") as raw, contextlib.ExitStack() as stack:
        fh = raw
        if str(path).endswith(".gz"):
            fh = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename=""))
        for qid in sorted(run):
            fh.write(_query_lines(qid, run[qid], tag, depth).encode("utf-8"))
