"""Reciprocal rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009)."""

from __future__ import annotations

from ..runs import Run
from .base import top_depth

PARAM = "rrf_k"  # fusion.methods.rrf.value / .grid, as reports name it


def check(k: float) -> str | None:
    """k > 0: at 0 the first rank would weigh 1 against 1/2, 1/3 ... and a negative k divides by zero."""
    return None if k > 0 else f"k must be > 0, got {k}"


def fuse(runs: list[Run], k: float, depth: int) -> Run:
    """score(d) = sum over runs r holding d in their top ``depth`` of 1 / (k + rank_r(d)).

    rank_r(d) is 1-based, in trec_eval order (score desc, doc id desc). A document
    outside a run's top ``depth`` gets nothing from that run.
    """
    fused: Run = {}
    for run in runs:
        for qid, docs in run.items():
            out = fused.setdefault(qid, {})
            for rank, (did, _) in enumerate(top_depth(docs, depth), start=1):
                out[did] = out.get(did, 0.0) + 1.0 / (k + rank)
    return fused
