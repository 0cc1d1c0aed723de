"""Paired comparisons under one rule, for the ``compare`` stage, ``report`` and ``compare-runs``.

Every comparison is one row: both means, the difference (candidate - baseline), its
simultaneous interval across the family of comparisons made together, the adjusted
p of the same randomization test (``stats.paired_comparison``), the minimum detectable
effect, win/tie/loss and a verdict that follows from the interval alone.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from . import stats
from .core.errors import InputError
from .metrics import measure_run, parse_measure


def per_query_measures(text: str, source: str) -> dict[str, dict]:
    """query id -> its entry (``measures``, ``first_positive_rank``, ...) of an evaluate stage's per_query.json."""
    try:
        queries = json.loads(text)["queries"]
        if not isinstance(queries, dict):
            raise TypeError("'queries' is not a mapping")
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise InputError(f"not an evaluate per_query.json ({exc})", source) from None
    return queries


def per_query_values(text: str, measure: str, source: str) -> dict[str, float]:
    """query id -> value of ``measure`` from the text of an evaluate stage's per_query.json."""
    return values_of(per_query_measures(text, source), measure, source)


def values_of(entries: dict, measure: str, source: str) -> dict[str, float]:
    """query id -> value of ``measure`` from per_query.json's parsed query entries."""
    values = {}
    for qid, entry in entries.items():
        measures = entry.get("measures", {})
        if measure not in measures:
            raise InputError(f"no value for {measure!r} (add it to evaluate.measures)", source,
                             field=f"queries.{qid}.measures")
        values[qid] = float(measures[measure])
    return values


def verdict(low: float, high: float, better: str = "candidate", worse: str = "baseline") -> str:
    if low > 0:
        return f"{better} better"
    if high < 0:
        return f"{worse} better"
    return "no significant difference"


def compare_family(items: list[tuple[dict[str, float], dict[str, float]]], family_level: float = 0.95,
                   permutations: int = 10000, seed: int = 0) -> list[dict | None]:
    """Judge every (baseline values, candidate values) pair as one family of comparisons.

    Each pair is compared over the queries both have; pairs that share none are None and
    are not counted in the family.
    """
    shared = [sorted(set(a) & set(b)) for a, b in items]
    family = sum(bool(q) for q in shared)
    rows: list[dict | None] = []
    for (base, cand), queries in zip(items, shared):
        if not queries:
            rows.append(None)
            continue
        a = np.array([base[q] for q in queries])  # (n,)
        b = np.array([cand[q] for q in queries])  # (n,)
        c = stats.paired_comparison(a, b, family, family_level, permutations, seed)
        wins, ties, losses = stats.win_tie_loss(a, b)
        rows.append({
            "queries": len(queries), "queries_only_in_one": len(set(base) ^ set(cand)),
            "baseline_mean": float(a.mean()), "candidate_mean": float(b.mean()),
            "mean_difference": c.mean_difference, "ci_low": c.low, "ci_high": c.high,
            "p_value": c.p_value, "p_adjusted": c.p_adjusted, "mde": c.mde,
            "wins": wins, "ties": ties, "losses": losses, "verdict": verdict(c.low, c.high),
            "level": c.level, "tail": c.tail,
        })
    return rows


def family_header(family_size: int, family_level: float, permutations: int, seed: int) -> dict:
    return {"adjustment": stats.ADJUSTMENT, "family_size": family_size, "family_level": family_level,
            "level": 1 - (1 - family_level) / max(family_size, 1), "permutations": permutations, "seed": seed,
            "power": stats.POWER}


def _read_entries(path: Path) -> dict[str, dict]:
    if not path.exists():
        raise InputError("file not found (run the evaluate stage for this run first)", str(path))
    return per_query_measures(path.read_text(encoding="utf-8"), str(path))


def strata_flags(entries: dict[str, dict]) -> dict[str, bool] | None:
    """query id -> seen (a relevant document is a training positive), or None when the file has no strata."""
    flags = {q: e.get("seen") for q, e in entries.items()}
    return None if any(not isinstance(v, bool) for v in flags.values()) else flags


def strata_groups(queries: set[str], *flags: dict[str, bool]) -> dict[str, list[str]] | None:
    """``{"seen": [...], "unseen": [...]}`` of ``queries`` (every flags map agreeing), or None unless both
    strata hold queries: a stratum that is empty, or the whole, adds no comparison."""
    groups = {name: sorted(q for q in queries if all(f.get(q) is flag for f in flags))
              for name, flag in (("seen", True), ("unseen", False))}
    return groups if all(groups.values()) else None


def compare(reports_root: str | Path, pairs: list[list[str]], measure: str, family_level: float = 0.95,
            permutations: int = 10000, seed: int = 0, runs: list[str] | None = None) -> dict:
    """Compare every pair on ``measure`` over the queries both runs were evaluated on, as one family.

    When the shared queries fall in both strata (seen: a relevant document is a training
    positive; unseen: none is), each pair is also compared on each stratum, and those rows
    join the family: what fine-tuning gains on documents it never saw is judged under the
    same simultaneous rule as the overall difference.

    ``runs``: the only run names a pair may use (the stage's declared dependencies), so that a
    pair added to params.yaml cannot read a report DVC does not track for this stage.
    """
    parse_measure(measure)
    root = Path(reports_root)
    cache: dict[str, dict[str, float]] = {}
    strata: dict[str, dict[str, bool] | None] = {}
    for i, pair in enumerate(pairs):
        if len(pair) != 2:
            raise InputError(f"expected [baseline, candidate], got {pair!r}", field=f"compare.pairs[{i}]")
        for name in pair:
            if runs is not None and name not in runs:
                raise InputError(f"run {name!r} is not among the runs this stage reads ({', '.join(runs)}): add "
                                 f"its per_query.json to the compare stage's deps and --runs in dvc.yaml",
                                 field=f"compare.pairs[{i}]")
            if name not in cache:
                path = root / name / "per_query.json"
                entries = _read_entries(path)
                cache[name] = values_of(entries, measure, str(path))
                strata[name] = strata_flags(entries)
    items, where = [], []  # (baseline, candidate) values; (pair index, stratum or None)
    for i, (a, b) in enumerate(pairs):
        items.append((cache[a], cache[b]))
        where.append((i, None))
        if strata[a] is None or strata[b] is None:
            continue
        members = strata_groups(set(cache[a]) & set(cache[b]), strata[a], strata[b])
        if members:
            for name, ids in members.items():
                items.append(({q: cache[a][q] for q in ids}, {q: cache[b][q] for q in ids}))
                where.append((i, name))
    rows = compare_family(items, family_level, permutations, seed)
    out: dict[str, dict] = {}
    for (i, stratum), row in zip(where, rows):
        a, b = pairs[i]
        if row is None:
            raise InputError(f"{a} and {b} share no evaluated query", str(root), field=f"compare.pairs[{i}]")
        if stratum is None:
            out[f"{a} vs {b}"] = {"baseline": a, "candidate": b, **row}
        else:
            out[f"{a} vs {b}"].setdefault("strata", {})[stratum] = row
    return {"measure": measure, **family_header(len(rows), family_level, permutations, seed), "pairs": out}


def _values(per_query: dict[str, dict[str, float]], measure: str) -> dict[str, float]:
    return {q: v[measure] for q, v in per_query.items() if measure in v}


def compare_runs(qrels: dict, base_run: dict, head_run: dict, measures: list[str], family_level: float = 0.95,
                 permutations: int = 10000, seed: int = 0) -> dict:
    """Two runs on the same qrels, one comparison per measure, the measures as one family."""
    measures = list(dict.fromkeys(measures))
    base, head = measure_run(qrels, base_run, measures), measure_run(qrels, head_run, measures)
    rows = compare_family([(_values(base.per_query, m), _values(head.per_query, m)) for m in measures],
                          family_level, permutations, seed)
    return {**family_header(sum(r is not None for r in rows), family_level, permutations, seed),
            "measures": {m: row for m, row in zip(measures, rows) if row is not None}}


def format_p(row: dict) -> str:
    return f"{row['p_adjusted']:.4f}"


def format_mde(mde: float) -> str:
    return "-" if math.isnan(mde) else f"±{mde:.4f}"


def rule_sentence(header: dict, what: str) -> str:
    """How the intervals and p-values of a family were made, for every markdown output."""
    m, level = header["family_size"], header["family_level"]
    return (f"{level:.0%} simultaneous intervals across the {m} {what} ({header['adjustment'].capitalize()}: "
            f"{header['level']:.2%} each). Each interval holds the shifts that a paired randomization test "
            f"({header['permutations']} random sign assignments, seed {header['seed']}) does not reject at "
            f"that level, and p is that test's p at 0, adjusted the same way: p <= {1 - level:.2f} exactly when "
            "the interval excludes 0. MDE: the smallest true difference found with "
            f"{header['power']:.0%} power at that level over that many queries; a difference well inside it "
            "is noise.")


def rough_tail_note(rows, header: dict) -> list[str]:
    rows = list(rows)
    notes = []
    if any(math.isinf(r["ci_low"]) or math.isinf(r["ci_high"]) for r in rows):
        notes.append("\nNote: an unbounded interval means too few queries for that level: not even a "
                     "difference of the same sign on every query could be told from noise.")
    if any(r["tail"] < 10 for r in rows):
        notes.append(f"\nNote: fewer than 10 sign flips beyond each end of some intervals; raise "
                     f"evaluate.permutations (now {header['permutations']}) for steadier interval ends.")
    return notes


def _pair_rows(result: dict):
    """(baseline, candidate, stratum label, row) for every comparison of a compare result, in family order."""
    for r in result["pairs"].values():
        yield r["baseline"], r["candidate"], "all", r
        for stratum, row in r.get("strata", {}).items():
            yield r["baseline"], r["candidate"], stratum, row


def to_markdown(result: dict) -> str:
    m, level = result["measure"], result["family_level"]
    rows = list(_pair_rows(result))
    stratified = any(stratum != "all" for _, _, stratum, _ in rows)
    lines = [f"# Paired comparison on {m}", "",
             ("Difference = candidate - baseline over the queries both were evaluated on; "
              + rule_sentence(result, "comparisons below")), ""]
    if stratified:
        lines += [("Queries: *seen* when one of its relevant documents is a positive of a training query, "
                  "*unseen* otherwise; the unseen rows say what fine-tuning carries over to documents it "
                  "never saw."), ""]
    lines += [(f"| baseline | candidate | queries | baseline {m} | candidate {m} | difference | "
               f"{level:.0%} simultaneous interval | p ({result['adjustment']}) | MDE | win/tie/loss | verdict |"),
              "|---|---|---:|---:|---:|---:|---|---:|---:|---|---|"]
    for a, b, stratum, r in rows:
        queries = f"{r['queries']}" if stratum == "all" else f"{r['queries']} {stratum}"
        lines.append(f"| {a} | {b} | {queries} | {r['baseline_mean']:.4f} | "
                     f"{r['candidate_mean']:.4f} | {r['mean_difference']:+.4f} | "
                     f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}] | "
                     f"{format_p(r)} | "
                     f"{format_mde(r['mde'])} | {r['wins']}/{r['ties']}/{r['losses']} | {r['verdict']} |")
    for r in result["pairs"].values():
        if r["queries_only_in_one"]:
            lines.append(f"\nNote: {r['queries_only_in_one']} queries were evaluated for only one of "
                         f"{r['baseline']} and {r['candidate']} and are left out of that pair.")
    lines += rough_tail_note([r for *_, r in rows], result)
    return "\n".join(lines) + "\n"


def runs_to_text(result: dict, base_name: str, head_name: str) -> str:
    """The ``compare-runs`` table: one line per measure."""
    header = ["measure", "queries", "base", "head", "difference", "interval", f"p ({result['adjustment']})",
              "MDE", "win/tie/loss", "verdict"]
    rows = [[m, str(r["queries"]), f"{r['baseline_mean']:.4f}", f"{r['candidate_mean']:.4f}",
             f"{r['mean_difference']:+.4f}", f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]",
             format_p(r), format_mde(r["mde"]),
             f"{r['wins']}/{r['ties']}/{r['losses']}", verdict(r["ci_low"], r["ci_high"], "head", "base")]
            for m, r in result["measures"].items()]
    widths = [max(len(x[i]) for x in [header] + rows) for i in range(len(header))]
    text = ["  ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip() for x in [header] + rows]
    text.insert(1, "  ".join("-" * w for w in widths))
    notes = [n.strip() for n in rough_tail_note(result["measures"].values(), result)]
    return "\n".join([f"base: {base_name}   head: {head_name}   difference = head - base", *text, "",
                      rule_sentence(result, "measures"), *notes]) + "\n"
