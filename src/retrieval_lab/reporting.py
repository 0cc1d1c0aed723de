"""``retrieval-lab report``: what a branch changed, and whether the change is real.

Reads two revisions of the pipeline's results (git-tracked metrics and DVC-cached
per-query values, fetched with ``dvc.api`` from the cache or the remote) and writes
``report.md`` with: the ``dvc metrics diff`` table, paired bootstrap CIs per retriever
on per-query values (head - base), the queries that gained or lost most with their
first-positive ranks, and PNG plots (recall@k base vs head, training loss curves).
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
from pathlib import Path

from .comparison import compare_values, per_query_values
from .core.atomic import atomic_path
from .core.config import Params

WORKSPACE = None  # head = the working tree


def read_at(path: str, rev: str | None, repo: str = ".") -> str | None:
    """Text of ``path`` at git revision ``rev`` (DVC outputs come from the cache/remote); None if absent."""
    if rev is WORKSPACE:
        p = Path(repo) / path
        return p.read_text(encoding="utf-8") if p.exists() else None
    import dvc.api

    try:
        return dvc.api.read(path, repo=repo, rev=rev, mode="r", encoding="utf-8")
    except Exception:  # noqa: BLE001  absent at that revision, or not pushed: the report says "missing"
        return None


def metrics_diff(base: str, head: str | None, repo: str = ".") -> dict:
    """``dvc metrics diff --json`` between the two revisions (head None: the workspace)."""
    cmd = ["dvc", "metrics", "diff", "--json", "--all", base] + ([head] if head else [])
    out = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, check=True).stdout
    return json.loads(out) if out.strip() else {}


def _number(x) -> str:
    return f"{x:.4f}" if isinstance(x, (int, float)) and not isinstance(x, bool) else str(x)


def metrics_table(diff: dict) -> list[str]:
    lines = ["| file | metric | base | head | change |", "|---|---|---:|---:|---:|"]
    for path in sorted(diff):
        for name, v in sorted(diff[path].items()):
            change = v.get("diff")
            lines.append(f"| {path} | {name} | {_number(v.get('old'))} | {_number(v.get('new'))} | "
                         f"{'' if change is None else _number(change)} |")
    return lines


def _first_ranks(text: str) -> dict[str, int | None]:
    return {q: e.get("first_positive_rank") for q, e in json.loads(text)["queries"].items()}


def _curve(text: str | None) -> tuple[list[int], list[float]] | None:
    if not text:
        return None
    rows = list(csv.DictReader(io.StringIO(text)))
    return [int(r["k"]) for r in rows], [float(r["recall"]) for r in rows]


def _loss(text: str | None) -> tuple[list[int], list[float]] | None:
    if not text:
        return None
    rows = list(csv.DictReader(io.StringIO(text), delimiter="\t"))
    key = next((k for k in rows[0] if k.endswith("loss")), None) if rows else None
    return ([int(r["step"]) for r in rows], [float(r[key]) for r in rows]) if key else None


def _plot(series: dict[str, tuple[list, list] | None], title: str, xlabel: str, ylabel: str,
          path: Path, xlog: bool = False) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = {k: v for k, v in series.items() if v}
    if not series:
        return False
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    for label, (x, y) in series.items():
        ax.plot(x, y, label=label, linestyle="--" if label.startswith("base") else "-")
    if xlog:
        ax.set_xscale("log")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return True


def build_report(base: str, head: str | None, out_dir: str | Path, params: Params, repo: str = ".",
                 retrievers: list[str] | None = None, top: int = 5) -> dict:
    """Write ``out_dir/report.md`` and PNGs; return the per-retriever statistics."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ds, measure, ev = params.dataset, params.compare.measure, params.evaluate
    head_name = head or "workspace"
    if retrievers is None:
        root = Path(repo) / "reports" / ds
        retrievers = sorted(p.parent.name for p in root.glob("*/per_query.json")) if head is None else []
        if not retrievers:  # head is a revision: ask DVC which per_query files it tracks
            import yaml

            lock = yaml.safe_load(read_at("dvc.lock", head, repo) or "{}") or {}
            retrievers = sorted({Path(o["path"]).parent.name for s in lock.get("stages", {}).values()
                                 for o in s.get("outs", []) if o["path"].endswith("per_query.json")})
    diff = metrics_diff(base, head, repo)
    lines = [f"# Retrieval report: `{head_name}` against `{base}` ({ds})", "",
             "## Metrics (`dvc metrics diff`)", ""] + metrics_table(diff) + [""]
    lines += [f"## Paired bootstrap on {measure} per retriever (head - base)", "",
              (f"{ev.ci_level:.0%} percentile CI over test queries, {ev.resamples} resamples, seed {ev.seed}; "
               "randomization p-value from paired sign flips."), "",
              "| retriever | queries | base | head | difference | CI | p | win/tie/loss | verdict |",
              "|---|---:|---:|---:|---:|---|---:|---|---|"]
    results, movers, plots = {}, [], []
    for name in retrievers:
        path = f"reports/{ds}/{name}/per_query.json"
        old, new = read_at(path, base, repo), read_at(path, head, repo)
        if old is None or new is None:
            lines.append(f"| {name} | | | | | missing at {'base' if old is None else 'head'} | | | |")
            continue
        a, b = per_query_values(old, measure, f"{base}:{path}"), per_query_values(new, measure, f"{head_name}:{path}")
        row = compare_values(a, b, ev.ci_level, ev.resamples, ev.permutations, ev.seed)
        if row is None:
            continue
        results[name] = row
        lines.append(f"| {name} | {row['queries']} | {row['baseline_mean']:.4f} | {row['candidate_mean']:.4f} | "
                     f"{row['mean_difference']:+.4f} | [{row['ci_low']:+.4f}, {row['ci_high']:+.4f}] | "
                     f"{row['p_value']:.4f} | {row['wins']}/{row['ties']}/{row['losses']} | "
                     f"{row['verdict'].replace('candidate', 'head').replace('baseline', 'base')} |")
        ra, rb = _first_ranks(old), _first_ranks(new)
        for q in set(a) & set(b):
            if a[q] != b[q]:
                movers.append((b[q] - a[q], name, q, a[q], b[q], ra.get(q), rb.get(q)))
        if row["mean_difference"] != 0 or row["wins"] or row["losses"]:
            png = out_dir / f"recall_{name}.png"
            curve = f"reports/{ds}/{name}/recall_curve.csv"
            if _plot({f"base {base}": _curve(read_at(curve, base, repo)),
                      f"head {head_name}": _curve(read_at(curve, head, repo))},
                     f"Recall@k: {name}", "k (cutoff)", "recall@k", png, xlog=True):
                plots.append(png.name)
    lines += ["", f"## Queries that moved most on {measure}", ""]
    if movers:
        lines += ["| retriever | query | base | head | first positive rank base → head |", "|---|---|---:|---:|---|"]
        movers.sort(key=lambda m: (-abs(m[0]), m[1], m[2]))
        for change, name, q, va, vb, rka, rkb in movers[:2 * top]:
            lines.append(f"| {name} | {q} | {va:.3f} | {vb:.3f} | {rka or 'not found'} → {rkb or 'not found'} |")
    else:
        lines.append("No query changed.")
    loss_series = {}
    for variant in params.train.variants:
        path = f"dvclive/{ds}/{variant}/plots/metrics/train/loss.tsv"
        loss_series[f"base {variant}"] = _loss(read_at(path, base, repo))
        loss_series[f"head {variant}"] = _loss(read_at(path, head, repo))
    if _plot(loss_series, "Fine-tuning loss", "step", "loss", out_dir / "training_loss.png"):
        plots.append("training_loss.png")
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    with atomic_path(out_dir / "report.md") as tmp:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"retrievers": results, "plots": plots, "metrics_diff": diff}
