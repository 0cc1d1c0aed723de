"""TREC runs: the shared currency between retrievers, fusion, mining and evaluation.

A run maps query id -> document id -> score. Order is always recomputed from the
scores with the trec_eval rule (score descending, then document id descending as
strings); a file's rank column is ignored. Runs are written in that order with
strictly decreasing scores, so every reader sees one order.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .core.atomic import atomic_path
from .core.errors import InputError

Run = dict[str, dict[str, float]]


def ranked(scores: dict[str, float]) -> list[tuple[str, float]]:
    """Documents in trec_eval order: score descending, ties by document id descending."""
    return sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)


def read_run(path: str | Path) -> Run:
    """Read a TREC 6-column run (``qid Q0 docid rank score tag``), checking every line."""
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", str(path))
    run: Run = {}
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"invalid UTF-8 at byte {exc.start}", str(path), number) from None
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 6:
                raise InputError(f"expected 6 columns (qid Q0 docid rank score tag), got {len(parts)}",
                                 str(path), number)
            qid, _, did, _, score_text, _ = parts
            try:
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


def _strictly_decreasing(scores: list[float]) -> list[float]:
    # Nudge tied scores down by one ulp at a time: the order is kept, values barely move.
    out: list[float] = []
    for score in scores:
        if out and score >= out[-1]:
            score = float(np.nextafter(out[-1], -np.inf))
        out.append(score)
    return out


def format_run(run: Run, tag: str, depth: int | None = None) -> str:
    lines = []
    for qid in sorted(run):
        order = ranked(run[qid])[:depth]
        scores = _strictly_decreasing([s for _, s in order])
        for rank, ((did, _), score) in enumerate(zip(order, scores), start=1):
            lines.append(f"{qid} Q0 {did} {rank} {score!r} {tag}\n")
    return "".join(lines)


def write_run(path: str | Path, run: Run, tag: str, depth: int | None = None) -> None:
    """Write a run atomically, queries sorted, at most ``depth`` documents each."""
    for qid, docs in run.items():
        for did, score in docs.items():
            if not math.isfinite(score):
                raise ValueError(f"non-finite score {score} for query {qid!r} document {did!r}")
    with atomic_path(path) as tmp:
        tmp.write_text(format_run(run, tag, depth), encoding="utf-8")
