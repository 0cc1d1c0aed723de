"""Render: ``report.md`` and its PNG plots from what was gathered and judged; reads and decides nothing.

Every comparison's numbers come from :func:`~retrieval_lab.comparison.row_cells` (one format for
the compare stage's table, ``compare-runs`` and this report).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .. import stats
from ..comparison import (
    ComparisonRow,
    Family,
    difference_text,
    interval_text,
    rough_tail_note,
    row_cells,
    rule_sentence,
    strata_flags,
)
from ..core.atomic import atomic_path
from ..core.params import Params
from ..latency import LatencyRow, markdown_rows
from ..page import Gate, Page, RunData, Summary, build_page, diagnosed_classes, summary_row
from ..tokenizer import Tokenizer
from .gather import Gathered, Retriever, Series
from .judge import LOSS_CLASSES, Judged, Judgement, number_text


def _plot(series: dict[str, Series | None], title: str, xlabel: str, ylabel: str, path: Path,
          xlog: bool = False) -> bool:
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


def plots(g: Gathered, out_dir: Path) -> list[str]:
    """Recall@k base vs head per changed retriever, and the training loss: the PNG names written."""
    written = []
    for name, (base, head) in g.recall.items():
        png = out_dir / f"recall_{name}.png"
        if _plot({f"base {g.base}": base, f"head {g.head_name}": head}, f"Recall@k: {name}", "k (cutoff)",
                 "recall@k", png, xlog=True):
            written.append(png.name)
    series = {}
    for variant, (base, head) in g.losses.items():
        series[f"base {variant}"], series[f"head {variant}"] = base, head
    if _plot(series, "Fine-tuning loss", "step", "loss", out_dir / "training_loss.png"):
        written.append("training_loss.png")
    return written


# ----------------------------------------------------------------------------- markdown


def _named(items: list[tuple[str, str, Mapping]]) -> str:
    return "; ".join(f"{name} {m} {difference_text(row)} {interval_text(row)}" for name, m, row in items)


def _below(tolerance: float) -> str:
    return "0" if tolerance == 0 else f"-{tolerance:g}"


def cannot_judge_line(blind: list[tuple[str, str]]) -> str:
    return "**Cannot judge**: " + "; ".join(f"{name}: {why}" for name, why in blind) + "."


def verdict_line(changed: int, total: int, regressions: list, worse: list, better: list,
                 tolerance: float, blind: list[tuple[str, str]] = (), reported: list = ()) -> str:
    """The report's first line: what the gate decided and why, in one sentence; then what the retrievers the
    gate does not name (``reported``) showed, so the line never hides a real difference the report holds.

    A regression seen is reported first; otherwise a gate that cannot see (``blind``) says so.
    """
    notable = [x for x in reported if x[2].excludes_zero]
    tail = f" Not gated (not in gate.retrievers): {_named(notable)}." if notable else ""
    return _verdict(changed, total, regressions, worse, better, tolerance, blind) + tail


def _verdict(changed: int, total: int, regressions: list, worse: list, better: list, tolerance: float,
             blind: list[tuple[str, str]]) -> str:
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
                "interval of the gated ones excludes 0.")
    head = "**Improvement**" if better and not worse else "**Mixed, within tolerance**"
    return f"{head} ({changed} of {total} retrievers changed): " + "; ".join(parts) + "."


def _cell(row: ComparisonRow) -> str:
    c = row_cells(row)
    diff = f"**{c.difference}**" if row.excludes_zero else c.difference
    return f"{c.baseline_mean} → {c.candidate_mean}<br>{diff} {c.interval}<br>MDE {c.mde}"


def _short_verdict(stats: dict[str, ComparisonRow]) -> str:
    better = [m for m, r in stats.items() if r.test.low > 0]
    worse = [m for m, r in stats.items() if r.test.high < 0]
    parts = ([f"better on {', '.join(better)}"] if better else []) + ([f"worse on {', '.join(worse)}"] if worse else [])
    return "; ".join(parts) or "no significant difference"


def retriever_table(changed: list[Retriever], key_measures: list[str], family: Family,
                    what: str = "comparisons in this table") -> list[str]:
    """One row per changed retriever: each key measure base → head, difference, interval, MDE."""
    lines = [f"| retriever | queries | {' | '.join(key_measures)} | verdict |",
             "|---|---:|" + "---|" * len(key_measures) + "---|"]
    for r in changed:
        cells = [_cell(r.stats[m]) if m in r.stats else "no shared query" for m in key_measures]
        queries = max((row.test.queries for row in r.stats.values()), default=0)
        lines.append(f"| {r.name} | {queries} | {' | '.join(cells)} | {_short_verdict(r.stats)} |")
    return lines + ["", "Each cell: base → head, difference head - base with its interval, minimum detectable "
                        "effect. " + rule_sentence(family, what), ""]


def comparisons_table(judged: list[Judged]) -> list[str]:
    """Every comparison of the gate's family, in full (a collapsed block)."""
    lines = ["", "<details><summary>Every comparison</summary>", "",
             ("| retriever | measure | queries | base | head | difference | interval | "
              f"p ({stats.ADJUSTMENT}) | MDE | win/tie/loss | verdict |"),
             "|---|---|---:|---:|---:|---:|---|---:|---:|---|---|"]
    for name, m, row in judged:
        c = row_cells(row)
        lines.append(f"| {name} | {m} | {c.queries} | {c.baseline_mean} | {c.candidate_mean} | {c.difference} | "
                     f"{c.interval} | {c.p} | {c.mde} | {c.win_tie_loss} | {c.verdict} |")
    return lines + ["", "</details>"]


def strata_table(strata: list[Judged], family: Family, measure: str) -> list[str]:
    lines = ["", f"## Seen and unseen queries ({measure}; shown, not gated)", "",
             ("A query is *seen* when one of its relevant documents is a positive of a training query, *unseen* "
             "otherwise: the unseen rows say what a change carries over to documents training never saw."), "",
             "| retriever | queries | base → head | difference | interval | verdict |", "|---|---:|---|---:|---|---|"]
    for name, stratum, row in strata:
        c = row_cells(row)
        lines.append(f"| {name} | {c.queries} {stratum} | {c.baseline_mean} → {c.candidate_mean} | "
                     f"{c.difference} | {c.interval} | {c.verdict} |")
    return lines + ["", rule_sentence(family, "stratum comparisons in this table")]


def losses_section(g: Gathered, j: Judgement, top: int, diagnose_k: int) -> list[str]:
    measure = j.measure
    lines = ["", f"## Queries that moved most: losses on {measure}, by the head run's failure class", ""]
    for r in g.changed:
        if r.name not in j.losses:  # not compared (a gated measure it lacks): the gate says why
            continue
        groups = j.losses[r.name]
        lost = sum(len(group) for group in groups.values())
        gained = r.stats[measure].wins if measure in r.stats else 0
        lines += [f"### {r.name}: {lost} queries lost, {gained} gained", ""]
        if not groups:
            continue
        k = (g.diagnoses.get(r.name) or {}).get("k", diagnose_k)
        lines += ["| class (head run) | queries | near duplicates in top k | meaning |", "|---|---:|---:|---|"]
        lines += [f"| {cls} | {len(group)} | {sum(q['near_duplicates'] for q in group)} | {LOSS_CLASSES[cls]} |"
                  for cls, group in groups.items()]
        lines += ["", f"| class | query | {measure} base → head | first positive rank base → head (k = {k}) |",
                  "|---|---|---|---|"]
        for cls, group in groups.items():
            for q in group[:top]:
                lines.append(f"| {cls} | {q['query']} | {q['base']:.3f} → {q['head']:.3f} ({q['change']:+.3f}) | "
                             f"{q['rank_base']} → {q['rank_head']} |")
            if len(group) > top:
                lines.append(f"| {cls} | … {len(group) - top} more | | |")
        lines.append("")
    if not g.changed:
        lines.append("No retriever changed.")
    return lines


def _diff_table(rows: list[tuple]) -> list[str]:
    lines = ["| file | field | base | head | change |", "|---|---|---:|---:|---:|"]
    for path, name, old, new, change in rows:
        lines.append(f"| {path} | {name} | {number_text(old)} | {number_text(new)} | "
                     f"{'' if change is None else number_text(change)} |")
    return lines


def metrics_diff_section(g: Gathered) -> list[str]:
    lines = ["", (f"<details><summary>Metrics diff: {len(g.measures_changed)} measure values changed in the "
                  f"metrics files read ({g.paths.metrics}/<retriever>.json, training metrics)</summary>"), ""]
    lines += _diff_table(g.measures_changed) if g.measures_changed else ["No measure changed."]
    if g.bookkeeping:
        lines += ["", "Bookkeeping fields that changed (counts and settings, not measures):", ""]
        lines += _diff_table(g.bookkeeping)
    return lines + ["", "</details>"]


def latency_section(g: Gathered) -> list[str]:
    """With --timing-root: each retriever timed at both revisions, its latency base -> head (shown, never
    gated), and how many had a timing at each revision."""
    if not g.paths.timing:
        return []
    rows = [LatencyRow(f"{name} @ {g.base}", f"{name} @ {g.head_name}", old, new)
            for name, (old, new) in sorted(g.timings.items()) if old is not None and new is not None]
    if len(rows) == len(g.timings):
        return markdown_rows(rows, "base → head")
    at = [sum(1 for pair in g.timings.values() if pair[i] is not None) for i in (0, 1)]
    return markdown_rows(rows, "base → head") + ["", (
        f"Latency (`{g.paths.timing}/<retriever>.json`): found at {g.base} for {at[0]} of {len(g.timings)} "
        f"retrievers, at {g.head_name} for {at[1]}. A folder git and DVC do not track (the pipeline's "
        "`latency/`) is read from the working tree only, so a revision never has it: compare two such "
        "folders with `retrieval-lab latency DIR --base OTHER_DIR`.")]


def markdown(g: Gathered, j: Judgement, dataset: str, pngs: list[str], top: int, diagnose_k: int) -> str:
    """``report.md``: verdict line first, then the tables, losses, plots and the metrics diff."""
    changed, found = g.changed, g.retrievers
    lines = [verdict_line(len(changed), len(found), j.regressions, j.worse, j.better, j.tolerance, j.blind,
                          j.reported)]
    if j.regressions and j.blind:
        lines.append(cannot_judge_line(j.blind))
    lines += ["", f"# Retrieval report: `{g.head_name}` against `{g.base}` ({dataset})", ""]
    gated = [r for r in changed if r.name in j.gated]
    if gated:
        lines += retriever_table(gated, j.key_measures, j.family, "distinct comparisons of the gate's family, the "
                                 "changed gated retrievers times the gated measures")
    reported = {n for n, *_ in j.reported}
    others = [r for r in changed if r.name in reported]
    if others:
        lines += ["## Reported, not gated (not in gate.retrievers)", ""]
        lines += retriever_table(others, j.key_measures, j.reported_family, "comparisons of retrievers the gate "
                                 "does not decide on (a family of their own)")
    unchanged = [r.name for r in found if r.status == "unchanged"]
    if unchanged:
        lines.append(f"Unchanged (identical per-query results): {', '.join(unchanged)}.")
    for status in ("missing at base", "missing at head"):
        gone = [r.name for r in found if r.status == status]
        if gone:
            lines.append(f"{status.capitalize()} (not compared): {', '.join(gone)}.")
    for name, vanished, new, common in j.query_changes:
        lines.append(f"Judged queries changed for {name} (allowed by --allow-query-change): {vanished} vanished at "
                     f"head, {new} new; compared on the {common} in common.")
    crossed = ", ".join(f"{n} {m}" for n, m, _ in j.regressions) or "none"
    lines += ["", (f"Gate (`--fail-on-regression`, tolerance {j.tolerance:g}): fails when a difference's whole "
                  f"interval lies below {_below(j.tolerance)}, and when a retriever cannot be judged. "
                  f"Crossed: {crossed}. Cannot judge: {', '.join(n for n, _ in j.blind) or 'none'}.")]
    lines += rough_tail_note([row for *_, row in j.judged], j.family)
    if j.judged:
        lines += comparisons_table(j.judged)
    if j.strata:
        lines += strata_table(j.strata, j.strata_family, j.measure)
    lines += latency_section(g)
    lines += losses_section(g, j, top, diagnose_k)
    if pngs:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in pngs]
    lines += metrics_diff_section(g)
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- the comparison page


def _plain(line: str) -> str:
    return line.replace("**", "")


def gate_of(g: Gathered, j: Judgement) -> Gate:
    """The gate's decision (the report's first line) and every reason behind it."""
    decision = _plain(verdict_line(len(g.changed), len(g.retrievers), j.regressions, j.worse, j.better,
                                   j.tolerance, j.blind, j.reported))
    reasons = [f"regression: {name} {m} {difference_text(row)} {interval_text(row)}, whole interval below "
               f"{_below(j.tolerance)}" for name, m, row in j.regressions]
    reasons += [f"cannot judge {name}: {why}" for name, why in j.blind]
    reasons.append(f"The gate (--fail-on-regression, tolerance {j.tolerance:g}) fails when a key measure's whole "
                   f"interval lies below {_below(j.tolerance)}, and when a retriever cannot be judged.")
    return Gate(decision, tuple(reasons))


def report_page(g: Gathered, j: Judgement, params: Params, title: str | None = None) -> Page:
    """Each changed retriever at base against itself at head: the gate, the key measures' and the strata's
    comparisons, and query by query the values, the head's failure classes and, where both revisions'
    run files can be read, the rankings."""
    rows = [summary_row(f"{n} @ {g.base}", f"{n} @ {g.head_name}", "all", m, row)
            for n, m, row in j.judged]
    rows += [summary_row(f"{n} @ {g.base}", f"{n} @ {g.head_name}", s, j.measure, row)
             for n, s, row in j.strata]
    rows += [summary_row(f"{n} @ {g.base}", f"{n} @ {g.head_name}", "all", m, row)
             for n, m, row in j.reported]
    notes = [n.strip() for n in rough_tail_note([row for *_, row in j.judged], j.family)]
    if j.reported:
        notes.append(f"Not gated (not in gate.retrievers): {', '.join(dict.fromkeys(n for n, *_ in j.reported))}; "
                     + rule_sentence(j.reported_family, "comparisons of retrievers the gate does not decide on"))
    if j.strata_family is not None:
        notes.append("Seen/unseen rows (shown, not gated): " + rule_sentence(j.strata_family, "stratum comparisons"))
    missing = [r.name for r in g.changed if None in g.rankings.get(r.name, (None, None))]
    if missing:
        where = (f"no {g.paths.runs}/<retriever>.trec" if g.paths.runs else "no --runs-root given")
        notes.append(f"No run file at one of the revisions for {', '.join(missing)} ({where}): values without "
                     "rankings.")
    summary = Summary(f"{g.head_name} against {g.base}: the key measures of every changed retriever",
                      tuple(rows), rule_sentence(j.family, "gated comparisons"), tuple(notes), gate_of(g, j))
    runs, pairs, strata = [], [], None
    for r in g.changed:
        base_run, head_run = g.rankings.get(r.name, (None, None))
        diagnosis = g.diagnoses.get(r.name)
        names = (f"{r.name} @ {g.base}", f"{r.name} @ {g.head_name}")
        runs.append(RunData(names[0], base_run or {}, {q: e["measures"] for q, e in r.base.items()}))
        runs.append(RunData(names[1], head_run or {}, {q: e["measures"] for q, e in r.head.items()},
                            None if diagnosis is None else diagnosed_classes(diagnosis, f"{r.name} diagnosis.json")))
        pairs.append(names)
        strata = strata or strata_flags(r.head)
    data, fields = g.dataset, params.retrieve.fields
    tokenizer = Tokenizer(params.tokenizer) if data is not None else None
    return build_page(f"Retrieval report: {g.head_name} against {g.base} ({title or params.dataset})", summary,
                      runs, pairs,
                      {q: x.text for q, x in data.queries.items()} if data else None, g.qrels,
                      (lambda d: data.corpus[d].content(fields) if d in data.corpus else "") if data else None,
                      strata, tokenizer, judged_k=params.evaluate.diagnose_k,
                      note=(f"Per-query values from {g.paths.reports}/<retriever>/per_query.json at both revisions; "
                            f"classes from the head's diagnosis.json; texts and judgments from the working tree."),
                      measure=j.measure)
