"""Weighted sum of min-max normalised scores (convex combination, CombSUM with a weight)."""

from __future__ import annotations

import math

from ..core.errors import InputError
from ..runs import Run
from .base import top_depth

PARAM = "alpha"  # fusion.methods.weighted.value / .grid, as reports name it


def check(alpha: float) -> str | None:
    """alpha, the first run's weight, in [0, 1]: a convex combination."""
    return None if 0.0 <= alpha <= 1.0 else f"alpha must lie in [0, 1], got {alpha}"


def _minmax(pairs: list[tuple[str, float]]) -> dict[str, float]:
    if not pairs:
        return {}
    scores = [s for _, s in pairs]
    if not all(math.isfinite(s) for s in scores):
        raise InputError(f"a run score is not finite ({min(scores)} .. {max(scores)})", field="--runs")
    low, high = min(scores), max(scores)
    if high == low:  # one document, or all tied: each is the run's best
        return {d: 1.0 for d, _ in pairs}
    if math.isinf(high - low):  # e.g. -1.7e308 .. 1.7e308: the span overflows, its half cannot
        low, high, scores = low / 2, high / 2, [s / 2 for s in scores]  # exact but for subnormal scores
    return {d: (s - low) / (high - low) for (d, _), s in zip(pairs, scores)}


def fuse(runs: list[Run], alpha: float, depth: int) -> Run:
    """score(d) = alpha * mm_a(d) + (1 - alpha) * mm_b(d), per query, over two runs a, b.

    mm_r(d) = (s_r(d) - min_r) / (max_r - min_r) over run r's top ``depth`` for the
    query (1 for every document when max_r = min_r). A document missing from run r
    gets mm_r = 0, the run's floor: it scored no better than the run's lowest kept
    document (for BM25, a document with no query term scores an implicit 0, below any
    listed one), so counting it at the minimum is the most favourable value that is
    still consistent with its absence.
    """
    if len(runs) != 2:
        raise InputError(f"weighted fusion combines exactly 2 runs, got {len(runs)}", field="--runs")
    if (why := check(alpha)) is not None:
        raise InputError(why, field="fusion.methods.weighted.value")
    a, b = runs
    fused: Run = {}
    for qid in set(a) | set(b):
        mm_a = _minmax(top_depth(a.get(qid, {}), depth))
        mm_b = _minmax(top_depth(b.get(qid, {}), depth))
        fused[qid] = {d: alpha * mm_a.get(d, 0.0) + (1.0 - alpha) * mm_b.get(d, 0.0)
                      for d in mm_a.keys() | mm_b.keys()}
    return fused
