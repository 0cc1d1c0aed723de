"""One table of the recipe runs: RR@3 and AP@3 with 95% bootstrap intervals, R@10, and latency (the user's code).

    python summarise.py metrics reports minilm-k3 minilm-k10 minilm32-k3

A value the table needs and evaluate did not write (a measure left out of evaluate.measures, a run
evaluated without --timing) is a one-line error naming the file and what to change.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from retrieval_lab.stats import mean_interval

MEASURES = ("RR@3", "AP@3")
MEASURED = "add it to evaluate.measures in params.yaml and run evaluate again"


class Missing(Exception):
    """A value the table shows is absent from evaluate's files."""


def _get(values: dict, key: str, path: Path, hint: str):
    if key not in values:
        raise Missing(f"{path}: no {key!r} ({hint})")
    return values[key]


def row(metrics_dir: str | Path, reports_dir: str | Path, name: str) -> dict:
    metrics_path = Path(metrics_dir) / f"{name}.json"
    per_query_path = Path(reports_dir) / name / "per_query.json"
    metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    queries = json.loads(per_query_path.read_text(encoding="utf-8"))["queries"]
    out = {"run": name, "queries": metrics["queries_evaluated"], "R@10": _get(metrics, "R@10", metrics_path, MEASURED),
           "latency": _get(metrics, "latency", metrics_path, "evaluate the run with --timing, the file retrieve "
                                                              "--timing wrote")}
    for m in MEASURES:
        values = [_get(q["measures"], m, per_query_path, MEASURED) for q in queries.values()]
        out[m] = mean_interval(values, level=0.95, resamples=10000, seed=5)
    return out


def table(metrics_dir: str | Path, reports_dir: str | Path, names: list[str]) -> str:
    lines = ["| run | queries | RR@3 [95% CI] | AP@3 [95% CI] | R@10 | p50 ms | p95 ms | QPS (concurrency) |",
             "|---|---:|---|---|---:|---:|---:|---:|"]
    for name in names:
        r = row(metrics_dir, reports_dir, name)
        cells = [f"{r[m][0]:.3f} [{r[m][1]:.3f}, {r[m][2]:.3f}]" for m in MEASURES]
        lat = r["latency"]
        lines.append(f"| {name} | {r['queries']} | {' | '.join(cells)} | {r['R@10']:.3f} | {lat['p50_ms']:.1f} | "
                     f"{lat['p95_ms']:.1f} | {lat['qps']:.1f} ({lat['concurrency']}) |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    try:
        print(table(sys.argv[1], sys.argv[2], sys.argv[3:]), end="")
    except Missing as exc:
        sys.exit(f"summarise.py: {exc}")
