"""``retrieval-lab report``: what a branch changed, whether the change is real, and what broke.

Reads two revisions of the pipeline's results (git-tracked metrics and DVC-cached
per-query values, fetched with ``dvc.api`` from the cache or the remote) and writes
``report.md``, first screen first:

1. a verdict line and one row per retriever whose per-query results changed: the key
   measures (``compare.measure`` + ``compare.key_measures``) base -> head, the difference
   with its simultaneous interval across every comparison in the table (the one rule of
   ``stats.paired_comparison``) and its minimum detectable effect; unchanged retrievers
   in one line;
2. the gate: measures whose interval lies entirely below -tolerance (``regressions``), and
   retrievers it cannot judge (``cannot_judge``: per-query results missing at a revision,
   identical while the metrics changed, no query in common): a gate that cannot see fails
   closed instead of reading "no change";
3. the queries that lost most, grouped by the head run's failure-diagnosis class, with
   their first-positive rank before and after;
4. PNG plots (recall@k base vs head, training loss), then the full ``dvc metrics diff``
   (changed values only, measures apart from bookkeeping counts) in a collapsed block.
"""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .comparison import (
    compare_family,
    family_header,
    format_mde,
    format_p,
    per_query_measures,
    rough_tail_note,
    rule_sentence,
    strata_flags,
    strata_groups,
    values_of,
)
from .core.atomic import atomic_path
from .core.errors import InputError
from .core.params import Params
from .diagnosis import CLASSES
from .metrics import parse_measure

WORKSPACE = None  # head = the working tree
STILL_IN_TOP = "in_top_k"  # a loser the head run still ranks a positive for within diagnose k
NO_DIAGNOSIS = "no_diagnosis"
LOSS_CLASSES = {**CLASSES, STILL_IN_TOP: "a positive is still in the top k, lower than before",
                NO_DIAGNOSIS: "the head revision has no diagnosis.json for this retriever"}


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


def check_revision(rev: str, repo: str, option: str) -> None:
    """Refuse a revision git does not know, before anything is read at it."""
    done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
                          cwd=repo, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise InputError(f"no such git revision {rev!r} in {repo}", field=option)


def metrics_diff(base: str, head: str | None, repo: str = ".") -> dict:
    """``dvc metrics diff --json`` between the two revisions (head None: the workspace)."""
    cmd = [sys.executable, "-m", "dvc", "metrics", "diff", "--json", "--all", base] + ([head] if head else [])
    done = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise InputError(f"dvc metrics diff {base} {head or 'workspace'} failed: {first}")
    return json.loads(done.stdout) if done.stdout.strip() else {}


# ----------------------------------------------------------------------------- metrics diff


def is_measure_field(name: str) -> bool:
    """A metrics field that is a measure (``nDCG@10``, ``val.R@100``) or a loss; the rest is bookkeeping."""
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "loss" or leaf.endswith("_loss"):
        return True
    try:
        parse_measure(leaf)
    except InputError:
        return False
    return True


def _number(x) -> str:
    if not isinstance(x, float):
        return str(x)  # counts stay counts
    return f"{x:.4f}"


def changed_fields(diff: dict) -> tuple[list[tuple], list[tuple]]:
    """(measures, bookkeeping): (file, field, old, new, change) for every value that differs.

    ``compare.json`` files are left out: their statistics are the compare stage's own report.
    """
    measures, bookkeeping = [], []
    for path in sorted(diff):
        if Path(path).name == "compare.json":
            continue
        for name, v in sorted(diff[path].items()):
            old, new = v.get("old"), v.get("new")
            if old == new:
                continue
            (measures if is_measure_field(name) else bookkeeping).append((path, name, old, new, v.get("diff")))
    return measures, bookkeeping


def _diff_table(rows: list[tuple]) -> list[str]:
    lines = ["| file | field | base | head | change |", "|---|---|---:|---:|---:|"]
    for path, name, old, new, change in rows:
        lines.append(f"| {path} | {name} | {_number(old)} | {_number(new)} | "
                     f"{'' if change is None else _number(change)} |")
    return lines


# ----------------------------------------------------------------------------- per retriever


@dataclass
class Retriever:
    name: str
    sources: tuple[str, str]  # where base and head came from, for error messages
    base: dict | None  # per_query.json "queries" at each revision; None when absent
    head: dict | None
    stats: dict[str, dict] = field(default_factory=dict)  # measure -> comparison row

    @property
    def status(self) -> str:
        if self.base is None or self.head is None:
            return "missing at base" if self.base is None else "missing at head"
        return "unchanged" if self.base == self.head else "changed"

    def values(self, measure: str, which: str) -> dict[str, float]:
        entries, source = (self.base, self.sources[0]) if which == "base" else (self.head, self.sources[1])
        return values_of(entries, measure, source)


def _tracked(ds: str, rev: str | None, repo: str) -> set[str]:
    """Retrievers whose per_query.json the revision's dvc.lock tracks (and, in the workspace, those present)."""
    import yaml

    found = set()
    if rev is WORKSPACE:
        found = {p.parent.name for p in (Path(repo) / "reports" / ds).glob("*/per_query.json")}
    lock = yaml.safe_load(read_at("dvc.lock", rev, repo) or "{}") or {}
    return found | {Path(o["path"]).parent.name for s in lock.get("stages", {}).values()
                    for o in s.get("outs", []) if o["path"].startswith(f"reports/{ds}/")
                    and o["path"].endswith("per_query.json")}


def _discover(ds: str, base: str, head: str | None, repo: str, measures_changed: list[tuple]) -> list[str]:
    """Every retriever either revision has: a retriever on one side only must be seen (and not judged)."""
    in_metrics = {Path(path).stem for path, *_ in measures_changed
                  if Path(path).parent.as_posix() == f"metrics/{ds}" and Path(path).name != "compare.json"}
    return sorted(_tracked(ds, base, repo) | _tracked(ds, head, repo) | in_metrics)


def unjudged(found: list[Retriever], key_measures: list[str], measures_changed: list[tuple],
             ds: str) -> list[tuple[str, str]]:
    """(retriever, why) for every retriever the gate cannot judge: it must fail closed on them.

    Per-query results missing at either revision; identical per-query results while the
    retriever's metrics file changed (stale or unpulled per-query files); a key measure
    with no query in common. No retriever at all is also a blind gate.
    """
    if not found:
        return [("(all)", f"no per-query results found under reports/{ds}/ at either revision")]
    out = []
    for r in found:
        if r.base is None and r.head is None:
            out.append((r.name, "per-query results missing at both revisions"))
        elif r.base is None or r.head is None:
            out.append((r.name, f"per-query results {r.status}"))
        elif r.status == "unchanged":
            moved = [f"{name} {_number(old)} → {_number(new)}" for path, name, old, new, _ in measures_changed
                     if path == f"metrics/{ds}/{r.name}.json"]
            if moved:
                why = f"per-query results identical but metrics/{ds}/{r.name}.json changed ({', '.join(moved)})"
                out.append((r.name, why))
        elif r.status == "changed":
            lacking = [m for m in key_measures if m not in r.stats]
            if lacking:
                out.append((r.name, f"no query in common for {', '.join(lacking)}"))
    return out


def _first_rank(entries: dict, qid: str) -> str:
    rank = entries.get(qid, {}).get("first_positive_rank")
    return "not found" if rank is None else str(rank)


def losses_by_class(retriever: Retriever, measure: str, diagnosis: dict | None) -> dict[str, list[dict]]:
    """Queries whose ``measure`` fell, most first, grouped by the head run's diagnosis class."""
    base, head = retriever.values(measure, "base"), retriever.values(measure, "head")
    diagnosed = {q["query"]: q for q in (diagnosis or {}).get("queries", [])}
    groups: dict[str, list[dict]] = {}
    losers = sorted((head[q] - base[q], q) for q in set(base) & set(head) if head[q] - base[q] < -1e-12)
    for change, qid in losers:
        entry = diagnosed.get(qid)
        cls = NO_DIAGNOSIS if diagnosis is None else (entry["class"] if entry else STILL_IN_TOP)
        groups.setdefault(cls, []).append({
            "query": qid, "base": base[qid], "head": head[qid], "change": change,
            "rank_base": _first_rank(retriever.base, qid), "rank_head": _first_rank(retriever.head, qid),
            "near_duplicates": bool(entry and entry.get("near_duplicates"))})
    return {cls: groups[cls] for cls in LOSS_CLASSES if cls in groups}


# ----------------------------------------------------------------------------- plots


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


# ----------------------------------------------------------------------------- markdown


def _interval(row: dict) -> str:
    return f"[{row['ci_low']:+.4f}, {row['ci_high']:+.4f}]"


def _named(items: list[tuple[str, str, dict]]) -> str:
    return "; ".join(f"{name} {m} {row['mean_difference']:+.4f} {_interval(row)}" for name, m, row in items)


def _below(tolerance: float) -> str:
    return "0" if tolerance == 0 else f"-{tolerance:g}"


def cannot_judge_line(blind: list[tuple[str, str]]) -> str:
    return "**Cannot judge**: " + "; ".join(f"{name}: {why}" for name, why in blind) + "."


def verdict_line(changed: int, total: int, regressions: list, worse: list, better: list,
                 tolerance: float, blind: list[tuple[str, str]] = ()) -> str:
    """The report's first line: what the gate decided and why, in one sentence.

    A regression seen is reported first; otherwise a gate that cannot see (``blind``) says so.
    """
    if regressions:
        return (f"**Regression**: {len(regressions)} measure(s) with the whole interval below "
                f"{_below(tolerance)}: {_named(regressions)}.")
    if blind:
        return cannot_judge_line(blind)
    if changed == 0:
        return f"**No change**: all {total} retrievers have identical per-query results at both revisions."
    parts = []
    if better:
        parts.append(f"better: {_named(better)}")
    if worse:
        parts.append(f"worse, within the tolerance {tolerance:g}: {_named(worse)}")
    if not parts:
        return (f"**No significant change**: {changed} of {total} retrievers changed, and no simultaneous "
                "interval excludes 0.")
    head = "**Improvement**" if better and not worse else "**Mixed, within tolerance**"
    return f"{head} ({changed} of {total} retrievers changed): " + "; ".join(parts) + "."


def _cell(row: dict) -> str:
    diff = f"{row['mean_difference']:+.4f}"
    if row["ci_low"] > 0 or row["ci_high"] < 0:
        diff = f"**{diff}**"
    return (f"{row['baseline_mean']:.4f} → {row['candidate_mean']:.4f}<br>{diff} {_interval(row)}"
            f"<br>MDE {format_mde(row['mde'])}")


def _short_verdict(stats: dict[str, dict]) -> str:
    better = [m for m, r in stats.items() if r["ci_low"] > 0]
    worse = [m for m, r in stats.items() if r["ci_high"] < 0]
    parts = ([f"better on {', '.join(better)}"] if better else []) + ([f"worse on {', '.join(worse)}"] if worse else [])
    return "; ".join(parts) or "no significant difference"


def strata_comparisons(changed: list[Retriever], measure: str, level: float, permutations: int,
                       seed: int) -> tuple[list[tuple[str, str, dict]], dict | None]:
    """(retriever, stratum, row) for each changed retriever whose head per-query results carry both
    strata (seen: a relevant document is a training positive; unseen: none is), one family of its
    own, and its header (None when no retriever has both strata). Shown, not gated: the gate's
    family stays the one of the overall differences."""
    items, labels = [], []
    for r in changed:
        flags = strata_flags(r.head)
        if flags is None:
            continue
        base, head = r.values(measure, "base"), r.values(measure, "head")
        groups = strata_groups(set(base) & set(head), flags)
        if groups is None:
            continue
        for name, ids in groups.items():
            items.append(({q: base[q] for q in ids}, {q: head[q] for q in ids}))
            labels.append((r.name, name))
    if not items:
        return [], None
    rows = compare_family(items, level, permutations, seed)
    return [(n, s, row) for (n, s), row in zip(labels, rows)], family_header(len(rows), level, permutations, seed)


def _strata_lines(strata: list[tuple[str, str, dict]], header: dict, measure: str) -> list[str]:
    lines = ["", f"## Seen and unseen queries ({measure}; shown, not gated)", "",
             ("A query is *seen* when one of its relevant documents is a positive of a training query, *unseen* "
             "otherwise: the unseen rows say what a change carries over to documents training never saw."), "",
             "| retriever | queries | base → head | difference | interval | verdict |", "|---|---:|---|---:|---|---|"]
    for name, stratum, row in strata:
        lines.append(f"| {name} | {row['queries']} {stratum} | {row['baseline_mean']:.4f} → "
                     f"{row['candidate_mean']:.4f} | {row['mean_difference']:+.4f} | {_interval(row)} | "
                     f"{row['verdict'].replace('candidate', 'head').replace('baseline', 'base')} |")
    return lines + ["", rule_sentence(header, "stratum comparisons in this table")]


def build_report(base: str, head: str | None, out_dir: str | Path, params: Params, repo: str = ".",
                 retrievers: list[str] | None = None, top: int = 10, tolerance: float = 0.0) -> dict:
    """Write ``out_dir/report.md`` and PNGs; return per-retriever statistics and the gate's regressions."""
    if not (math.isfinite(tolerance) and tolerance >= 0):  # nan or inf would switch the gate off
        raise InputError(f"tolerance must be a finite number >= 0, got {tolerance}", field="--tolerance")
    check_revision(base, repo, "--base")
    if head is not WORKSPACE:
        check_revision(head, repo, "--head")
    ds, ev = params.dataset, params.evaluate
    measure = params.compare.measure
    key_measures = list(dict.fromkeys([measure] + params.compare.key_measures))
    for name in key_measures:
        parse_measure(name)
    diff = metrics_diff(base, head, repo)
    measures_changed, bookkeeping = changed_fields(diff)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    head_name = head or "workspace"
    names = retrievers if retrievers is not None else _discover(ds, base, head, repo, measures_changed)
    found: list[Retriever] = []
    for name in names:
        path = f"reports/{ds}/{name}/per_query.json"
        old, new = read_at(path, base, repo), read_at(path, head, repo)
        sources = (f"{base}:{path}", f"{head_name}:{path}")
        found.append(Retriever(name, sources, None if old is None else per_query_measures(old, sources[0]),
                               None if new is None else per_query_measures(new, sources[1])))

    changed = [r for r in found if r.status == "changed"]
    items = [(r, m) for r in changed for m in key_measures]
    rows = compare_family([(r.values(m, "base"), r.values(m, "head")) for r, m in items],
                          ev.ci_level, ev.permutations, ev.seed)
    for (r, m), row in zip(items, rows):
        if row is not None:
            r.stats[m] = row
    header = family_header(sum(row is not None for row in rows), ev.ci_level, ev.permutations, ev.seed)
    judged = [(r.name, m, row) for r in changed for m, row in r.stats.items()]
    regressions = [x for x in judged if x[2]["ci_high"] < -tolerance]
    worse = [x for x in judged if x[2]["ci_high"] < 0 and x not in regressions]
    better = [x for x in judged if x[2]["ci_low"] > 0]
    blind = unjudged(found, key_measures, measures_changed, ds)

    lines = [verdict_line(len(changed), len(found), regressions, worse, better, tolerance, blind)]
    if regressions and blind:
        lines.append(cannot_judge_line(blind))
    lines += ["", f"# Retrieval report: `{head_name}` against `{base}` ({ds})", ""]
    if changed:
        lines += [f"| retriever | queries | {' | '.join(key_measures)} | verdict |",
                  "|---|---:|" + "---|" * len(key_measures) + "---|"]
        for r in changed:
            cells = [_cell(r.stats[m]) if m in r.stats else "no shared query" for m in key_measures]
            queries = max((row["queries"] for row in r.stats.values()), default=0)
            lines.append(f"| {r.name} | {queries} | {' | '.join(cells)} | {_short_verdict(r.stats)} |")
        lines += ["", "Each cell: base → head, difference head - base with its interval, minimum detectable "
                      "effect. " + rule_sentence(header, "comparisons in this table"), ""]
    unchanged = [r.name for r in found if r.status == "unchanged"]
    if unchanged:
        lines.append(f"Unchanged (identical per-query results): {', '.join(unchanged)}.")
    for status in ("missing at base", "missing at head"):
        gone = [r.name for r in found if r.status == status]
        if gone:
            lines.append(f"{status.capitalize()} (not compared): {', '.join(gone)}.")
    crossed = ", ".join(f"{n} {m}" for n, m, _ in regressions) or "none"
    lines += ["", (f"Gate (`--fail-on-regression`, tolerance {tolerance:g}): fails when a difference's whole "
                  f"interval lies below {_below(tolerance)}, and when a retriever cannot be judged. "
                  f"Crossed: {crossed}. Cannot judge: {', '.join(n for n, _ in blind) or 'none'}.")]
    lines += rough_tail_note([row for row in rows if row is not None], header)

    if judged:
        lines += ["", "<details><summary>Every comparison</summary>", "",
                  ("| retriever | measure | queries | base | head | difference | interval | "
                  f"p ({header['adjustment']}) | MDE | win/tie/loss | verdict |"),
                  "|---|---|---:|---:|---:|---:|---|---:|---:|---|---|"]
        for name, m, row in judged:
            lines.append(f"| {name} | {m} | {row['queries']} | {row['baseline_mean']:.4f} | "
                         f"{row['candidate_mean']:.4f} | {row['mean_difference']:+.4f} | {_interval(row)} | "
                         f"{format_p(row)} | "
                         f"{format_mde(row['mde'])} | {row['wins']}/{row['ties']}/{row['losses']} | "
                         f"{row['verdict'].replace('candidate', 'head').replace('baseline', 'base')} |")
        lines += ["", "</details>"]

    strata, strata_header = strata_comparisons(changed, measure, ev.ci_level, ev.permutations, ev.seed)
    if strata:
        lines += _strata_lines(strata, strata_header, measure)

    losses = {}
    lines += ["", f"## Queries that moved most: losses on {measure}, by the head run's failure class", ""]
    for r in changed:
        diagnosis_text = read_at(f"reports/{ds}/{r.name}/diagnosis.json", head, repo)
        diagnosis = json.loads(diagnosis_text) if diagnosis_text else None
        groups = losses_by_class(r, measure, diagnosis)
        losses[r.name] = groups
        lost = sum(len(g) for g in groups.values())
        gained = r.stats.get(measure, {}).get("wins", 0)
        lines += [f"### {r.name}: {lost} queries lost, {gained} gained", ""]
        if not groups:
            continue
        k = (diagnosis or {}).get("k", ev.diagnose_k)
        lines += ["| class (head run) | queries | near duplicates in top k | meaning |", "|---|---:|---:|---|"]
        lines += [f"| {cls} | {len(g)} | {sum(q['near_duplicates'] for q in g)} | {LOSS_CLASSES[cls]} |"
                  for cls, g in groups.items()]
        lines += ["", f"| class | query | {measure} base → head | first positive rank base → head (k = {k}) |",
                  "|---|---|---|---|"]
        for cls, group in groups.items():
            for q in group[:top]:
                lines.append(f"| {cls} | {q['query']} | {q['base']:.3f} → {q['head']:.3f} ({q['change']:+.3f}) | "
                             f"{q['rank_base']} → {q['rank_head']} |")
            if len(group) > top:
                lines.append(f"| {cls} | … {len(group) - top} more | | |")
        lines.append("")
    if not changed:
        lines.append("No retriever changed.")

    plots = []
    for r in changed:
        png = out_dir / f"recall_{r.name}.png"
        curve = f"reports/{ds}/{r.name}/recall_curve.csv"
        if _plot({f"base {base}": _curve(read_at(curve, base, repo)),
                  f"head {head_name}": _curve(read_at(curve, head, repo))},
                 f"Recall@k: {r.name}", "k (cutoff)", "recall@k", png, xlog=True):
            plots.append(png.name)
    loss_series = {}
    for variant in params.train.variants:
        path = f"dvclive/{ds}/{variant}/plots/metrics/train/loss.tsv"
        loss_series[f"base {variant}"] = _loss(read_at(path, base, repo))
        loss_series[f"head {variant}"] = _loss(read_at(path, head, repo))
    if _plot(loss_series, "Fine-tuning loss", "step", "loss", out_dir / "training_loss.png"):
        plots.append("training_loss.png")
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]

    lines += ["", (f"<details><summary><code>dvc metrics diff</code>: {len(measures_changed)} measure values changed"
                  "</summary>"), ""]
    lines += _diff_table(measures_changed) if measures_changed else ["No measure changed."]
    if bookkeeping:
        lines += ["", "Bookkeeping fields that changed (counts and settings, not measures):", ""]
        lines += _diff_table(bookkeeping)
    lines += ["", "</details>"]
    with atomic_path(out_dir / "report.md") as tmp:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"retrievers": {r.name: r.stats for r in changed}, "unchanged": unchanged, "family": header,
            "regressions": [{"retriever": n, "measure": m, **row} for n, m, row in regressions],
            "cannot_judge": [{"retriever": n, "reason": why} for n, why in blind],
            "strata": [{"retriever": n, "stratum": s, **row} for n, s, row in strata],
            "losses": losses, "plots": plots, "metrics_diff": diff}
