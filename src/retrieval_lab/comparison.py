"""The ``compare`` stage: paired significance of one measure between runs, from their per_query.json.

For each ``[baseline, candidate]`` pair of ``compare.pairs``: both means, mean
difference (candidate - baseline), percentile bootstrap CI, randomization p-value,
Holm-adjusted p across all pairs, win/tie/loss counts and a verdict read off the CI.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import stats
from .core.errors import InputError
from .metrics import parse_measure


def per_query_values(text: str, measure: str, source: str) -> dict[str, float]:
    """query id -> value of ``measure`` from the text of an evaluate stage's per_query.json."""
    try:
        queries = json.loads(text)["queries"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise InputError(f"not an evaluate per_query.json ({exc})", source) from None
    values = {}
    for qid, entry in queries.items():
        measures = entry.get("measures", {})
        if measure not in measures:
            raise InputError(f"no value for {measure!r} (add it to evaluate.measures)", source,
                             field=f"queries.{qid}.measures")
        values[qid] = float(measures[measure])
    return values


def read_per_query(path: Path, measure: str) -> dict[str, float]:
    if not path.exists():
        raise InputError("file not found (run the evaluate stage for this run first)", str(path))
    return per_query_values(path.read_text(encoding="utf-8"), measure, str(path))


def verdict(low: float, high: float) -> str:
    if low > 0:
        return "candidate better (CI excludes 0)"
    if high < 0:
        return "baseline better (CI excludes 0)"
    return "no significant difference"


def compare_values(base: dict[str, float], cand: dict[str, float], ci_level: float = 0.95,
                   resamples: int = 2000, permutations: int = 5000, seed: int = 0) -> dict | None:
    """Paired statistics of per-query values over the queries both have; None when they share none."""
    queries = sorted(set(base) & set(cand))
    if not queries:
        return None
    a = np.array([base[q] for q in queries])  # (n,)
    b = np.array([cand[q] for q in queries])  # (n,)
    ci = stats.paired_bootstrap(a, b, ci_level, resamples, seed)
    wins, ties, losses = stats.win_tie_loss(a, b)
    return {
        "queries": len(queries), "queries_only_in_one": len(set(base) ^ set(cand)),
        "baseline_mean": float(a.mean()), "candidate_mean": float(b.mean()),
        "mean_difference": ci.mean_difference, "ci_low": ci.low, "ci_high": ci.high,
        "p_value": stats.randomization_test(a, b, permutations, seed),
        "wins": wins, "ties": ties, "losses": losses, "verdict": verdict(ci.low, ci.high),
    }


def compare(reports_root: str | Path, pairs: list[list[str]], measure: str, ci_level: float = 0.95,
            resamples: int = 2000, permutations: int = 5000, seed: int = 0) -> dict:
    """Compare every pair on ``measure`` over the queries both runs were evaluated on."""
    parse_measure(measure)
    root = Path(reports_root)
    cache: dict[str, dict[str, float]] = {}
    rows = []
    for i, pair in enumerate(pairs):
        if len(pair) != 2:
            raise InputError(f"expected [baseline, candidate], got {pair!r}", field=f"compare.pairs[{i}]")
        for name in pair:
            if name not in cache:
                cache[name] = read_per_query(root / name / "per_query.json", measure)
        row = compare_values(cache[pair[0]], cache[pair[1]], ci_level, resamples, permutations, seed)
        if row is None:
            raise InputError(f"{pair[0]} and {pair[1]} share no evaluated query", str(root),
                             field=f"compare.pairs[{i}]")
        rows.append({"baseline": pair[0], "candidate": pair[1], **row})
    for row, adjusted in zip(rows, stats.holm([r["p_value"] for r in rows])):
        row["p_holm"] = adjusted
    return {"measure": measure, "ci_level": ci_level, "resamples": resamples, "permutations": permutations,
            "seed": seed, "pairs": {f"{r['baseline']} vs {r['candidate']}": r for r in rows}}


def to_markdown(result: dict) -> str:
    m, level = result["measure"], result["ci_level"]
    lines = [f"# Paired comparison on {m}", "",
             ("Difference = candidate - baseline over the queries both were evaluated on; "
              f"{level:.0%} percentile bootstrap CI ({result['resamples']} resamples), two-sided paired "
              f"randomization p ({result['permutations']} sign flips), Holm-adjusted across "
              f"{len(result['pairs'])} pairs; seed {result['seed']}."), "",
             (f"| baseline | candidate | queries | baseline {m} | candidate {m} | difference | "
              f"{level:.0%} CI | p | p (Holm) | win/tie/loss | verdict |"),
             "|---|---|---:|---:|---:|---:|---|---:|---:|---|---|"]
    for r in result["pairs"].values():
        lines.append(f"| {r['baseline']} | {r['candidate']} | {r['queries']} | {r['baseline_mean']:.4f} | "
                     f"{r['candidate_mean']:.4f} | {r['mean_difference']:+.4f} | "
                     f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}] | {r['p_value']:.4f} | {r['p_holm']:.4f} | "
                     f"{r['wins']}/{r['ties']}/{r['losses']} | {r['verdict']} |")
    odd = [r for r in result["pairs"].values() if r["queries_only_in_one"]]
    for r in odd:
        lines.append(f"\nNote: {r['queries_only_in_one']} queries were evaluated for only one of "
                     f"{r['baseline']} and {r['candidate']} and are left out of that pair.")
    return "\n".join(lines) + "\n"
