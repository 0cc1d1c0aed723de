"""Reciprocal rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009)."""

from __future__ import annotations

from ..runs import Run
from .base import top_depth

PARAM, GRID = "rrf_k", "rrf_k_grid"  # the fusion params this method reads


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
