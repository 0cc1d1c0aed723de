"""Mean ± standard deviation of each run's measure over several runs of the pipeline (training seeds).

    python scripts/seed_spread.py metrics-s42/ metrics-s43/ metrics-s44/ [--measure nDCG@10] [--json]

Each argument is a metrics folder (``metrics/<dataset>/`` of one experiment: ``dvc exp apply NAME``
then copy it, or ``git archive`` the experiment's ref). For every run found in all of them it prints
the overall mean and, where the evaluate stage wrote both strata, the seen and unseen means, each as
mean ± sample standard deviation over the folders: a difference smaller than that spread is one a
reseed could erase.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from retrieval_lab.core.parse import json_loads

STRATA = ("all", "seen", "unseen")


def _value(metrics: dict, stratum: str, measure: str) -> float | None:
    if stratum == "all":
        return metrics.get(measure)
    return (metrics.get(stratum) or {}).get(measure)


def spread(folders: list[Path], measure: str = "nDCG@10") -> dict[str, dict[str, dict]]:
    """run -> stratum -> {"values": [...], "mean": m, "sd": s (None for one folder), "queries": n}."""
    runs = None
    for folder in folders:
        names = {p.stem for p in folder.glob("*.json") if p.stem != "compare"}
        runs = names if runs is None else runs & names
    out: dict[str, dict[str, dict]] = {}
    for run in sorted(runs or ()):
        files = [json_loads((path := folder / f"{run}.json").read_text(encoding="utf-8"), str(path))
                 for folder in folders]
        out[run] = {}
        for stratum in STRATA:
            values = [_value(m, stratum, measure) for m in files]
            if any(v is None for v in values):
                continue
            queries = files[0]["queries_evaluated"] if stratum == "all" else files[0][stratum]["queries"]
            out[run][stratum] = {"values": values, "mean": statistics.fmean(values),
                                 "sd": statistics.stdev(values) if len(values) > 1 else None, "queries": queries}
    return out


def to_markdown(table: dict[str, dict[str, dict]], measure: str, seeds: int) -> str:
    def cell(entry: dict | None) -> str:
        if entry is None:
            return "-"
        sd = "" if entry["sd"] is None else f" ± {entry['sd']:.4f}"
        return f"{entry['mean']:.4f}{sd} ({entry['queries']})"

    lines = [f"| run | {measure} all | seen | unseen |", "|---|---:|---:|---:|"]
    for run, strata in table.items():
        lines.append(f"| {run} | " + " | ".join(cell(strata.get(s)) for s in STRATA) + " |")
    return "\n".join(lines) + f"\n\nMean ± sample standard deviation over {seeds} folders; (queries).\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--measure", default="nDCG@10")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    missing = [str(f) for f in args.folders if not f.is_dir()]
    if missing:
        print(f"error: not a folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    table = spread(args.folders, args.measure)
    print(json.dumps(table, indent=2) if args.json else to_markdown(table, args.measure, len(args.folders)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
