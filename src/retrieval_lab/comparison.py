"""Paired comparisons under one rule, for the ``compare`` stage, ``report`` and ``compare-runs``.

Every comparison is one :class:`ComparisonRow`: both means, the judged difference
(``stats.Comparison``: candidate - baseline, its simultaneous interval across the family of
comparisons made together, the adjusted p of the same randomization test, the minimum
detectable effect), win/tie/loss, and a verdict that follows from the interval alone.
The rows' text (every number of every table) comes from :func:`row_cells` only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from . import stats
from .core.atomic import check_whole
from .core.data import require_file
from .core.errors import InputError
from .core.parse import json_loads
from .latency import LatencyRow, markdown_rows, read_summary
from .metrics import Coverage, measure_run, parse_measure
from .report_files import PER_QUERY

ALL = "all"  # the stratum label of a comparison over every shared query


class _JsonView(Mapping):
    """Reads as the JSON object ``to_json`` writes, so callers that index the file index the object alike."""

    def __getitem__(self, key: str):
        return self.to_json()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_json())

    def __len__(self) -> int:
        return len(self.to_json())


@dataclass(frozen=True)
class Family(_JsonView):
    """How a family of comparisons was judged together (compare.json's header)."""

    size: int
    family_level: float
    permutations: int
    seed: int

    @property
    def level(self) -> float:
        return 1 - (1 - self.family_level) / max(self.size, 1)

    def to_json(self) -> dict:
        return {"adjustment": stats.ADJUSTMENT, "family_size": self.size, "family_level": self.family_level,
                "level": self.level, "permutations": self.permutations, "seed": self.seed, "power": stats.POWER}

    @classmethod
    def from_json(cls, obj: dict) -> Family:
        return cls(obj["family_size"], obj["family_level"], obj["permutations"], obj["seed"])


VERDICTS = ("candidate better", "baseline better", "no significant difference")  # the one wording everywhere


def verdict(low: float, high: float) -> str:
    """The verdict of an interval of candidate - baseline (in base/head tables, head is the candidate)."""
    return VERDICTS[0] if low > 0 else VERDICTS[1] if high < 0 else VERDICTS[2]


@dataclass(frozen=True)
class ComparisonRow(_JsonView):
    """One judged comparison: the test (``stats.Comparison``) and what the table shows beside it."""

    test: stats.Comparison
    baseline_mean: float
    candidate_mean: float
    queries_only_in_one: int
    wins: int
    ties: int
    losses: int

    @property
    def excludes_zero(self) -> bool:
        return self.test.excludes_zero

    def verdict(self) -> str:
        return verdict(self.test.low, self.test.high)

    def to_json(self) -> dict:
        t = self.test
        return {"queries": t.queries, "queries_only_in_one": self.queries_only_in_one,
                "baseline_mean": self.baseline_mean, "candidate_mean": self.candidate_mean,
                "mean_difference": t.mean_difference, "ci_low": t.low, "ci_high": t.high,
                "p_value": t.p_value, "p_adjusted": t.p_adjusted, "mde": t.mde,
                "wins": self.wins, "ties": self.ties, "losses": self.losses, "verdict": self.verdict(),
                "level": t.level, "tail": t.tail}

    @classmethod
    def from_json(cls, obj: dict, family: Family) -> ComparisonRow:
        test = stats.Comparison(
            mean_difference=obj["mean_difference"], low=obj["ci_low"], high=obj["ci_high"], p_value=obj["p_value"],
            p_adjusted=obj["p_adjusted"], mde=obj["mde"], queries=obj["queries"], family_size=family.size,
            family_level=family.family_level, level=obj["level"], permutations=family.permutations,
            seed=family.seed, tail=obj["tail"])
        return cls(test, obj["baseline_mean"], obj["candidate_mean"], obj["queries_only_in_one"],
                   obj["wins"], obj["ties"], obj["losses"])


@dataclass(frozen=True)
class PairComparison:
    """A compare-stage row: which runs, over which queries (``stratum``: ``all``, ``seen`` or ``unseen``)."""

    baseline: str
    candidate: str
    stratum: str
    row: ComparisonRow

    @property
    def key(self) -> str:
        return f"{self.baseline} vs {self.candidate}"


@dataclass(frozen=True)
class Comparisons:
    """The compare stage's result: every pair (and its strata) on one measure, judged as one family."""

    measure: str
    family: Family
    rows: tuple[PairComparison, ...]  # family order: each pair's overall row, then its strata
    latency: tuple[LatencyRow, ...] = ()  # with a timing root, pairs whose runs both have a timing: not judged
    untimed: tuple[str, ...] = ()  # with a timing root, the pairs' runs without one (fused runs are never timed)

    def to_json(self) -> dict:
        pairs: dict[str, dict] = {}
        for r in self.rows:
            if r.stratum == ALL:
                pairs[r.key] = {"baseline": r.baseline, "candidate": r.candidate, **r.row.to_json()}
            else:
                pairs[r.key].setdefault("strata", {})[r.stratum] = r.row.to_json()
        out = {"measure": self.measure, **self.family.to_json(), "pairs": pairs}
        if self.latency:  # added last, and only when measured: the other keys keep their bytes
            out["latency"] = {f"{r.baseline} vs {r.candidate}": r.to_json() for r in self.latency}
        return out

    @classmethod
    def from_json(cls, obj: dict) -> Comparisons:
        """Read a compare.json back (``readme_tables``, ``bench_report``)."""
        family = Family.from_json(obj)
        rows = []
        for pair in obj["pairs"].values():
            a, b = pair["baseline"], pair["candidate"]
            rows.append(PairComparison(a, b, ALL, ComparisonRow.from_json(pair, family)))
            rows += [PairComparison(a, b, s, ComparisonRow.from_json(row, family))
                     for s, row in pair.get("strata", {}).items()]
        return cls(obj["measure"], family, tuple(rows))


@dataclass(frozen=True)
class RunsComparison:
    """``compare-runs``: one comparison per measure, the measures as one family."""

    family: Family
    measures: dict[str, ComparisonRow]
    coverage: dict[str, Coverage]  # "base", "head" -> the queries each run's means cover

    def to_json(self) -> dict:
        return {**self.family.to_json(), "measures": {m: row.to_json() for m, row in self.measures.items()},
                "coverage": {side: c.counts() for side, c in self.coverage.items()}}


def per_query_measures(text: str, source: str) -> dict[str, dict]:
    """query id -> its entry (``measures``, ``first_positive_rank``, ...) of an evaluate stage's per_query.json."""
    try:
        queries = json_loads(text, source)["queries"]
        if not isinstance(queries, dict):
            raise TypeError("'queries' is not a mapping")
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise InputError(f"not an evaluate per_query.json ({exc})", source) from None
    except InputError:
        raise  # json_loads named the file, line and field
    for qid, entry in queries.items():  # every value the comparisons read is a number, or the file is refused
        measures = entry.get("measures") if isinstance(entry, dict) else None
        if not isinstance(measures, dict):
            raise InputError("expected an object with a 'measures' object", source, field=f"queries.{qid}")
        for name, value in measures.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InputError(f"expected a number, got {json.dumps(value)[:40]}", source,
                                 field=f"queries.{qid}.measures.{name}")
    return queries


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


def _comparison_key(base: dict[str, float], cand: dict[str, float], queries: list[str]) -> tuple:
    """What decides a comparison's outcome: the aligned values (bits and all) over its queries."""
    return tuple((q, float(base[q]).hex(), float(cand[q]).hex()) for q in queries)


def compare_family(items: list[tuple[dict[str, float], dict[str, float]]], family_level: float = 0.95,
                   permutations: int = 10000, seed: int = 0) -> list[ComparisonRow | None]:
    """Judge every (baseline values, candidate values) pair as one family of comparisons.

    Each pair is compared over the queries both have; pairs that share none are None and are not
    counted in the family. Pairs with identical values on identical queries count once: they are the
    same test on the same data (same signs, same seed), rejected together or not at all, so a second
    copy adds no chance of a false finding and must not widen every interval (issue 51: declaring a
    retriever and its HTTP copy halved the gate's power).
    """
    shared = [sorted(set(a) & set(b)) for a, b in items]
    keys = [_comparison_key(a, b, q) if q else None for (a, b), q in zip(items, shared)]
    family = len({k for k in keys if k is not None})
    rows: list[ComparisonRow | None] = []
    done: dict[tuple, ComparisonRow] = {}
    for (base, cand), queries, key in zip(items, shared, keys):
        if key is None:
            rows.append(None)
            continue
        if key not in done:
            a = np.array([base[q] for q in queries])  # (n,)
            b = np.array([cand[q] for q in queries])  # (n,)
            test = stats.paired_comparison(a, b, family, family_level, permutations, seed)
            done[key] = ComparisonRow(test, float(a.mean()), float(b.mean()), len(set(base) ^ set(cand)),
                                      *stats.win_tie_loss(a, b))
        rows.append(replace(done[key], queries_only_in_one=len(set(base) ^ set(cand))))
    return rows


def family_of(rows: Iterable[ComparisonRow | None], family_level: float, permutations: int, seed: int) -> Family:
    """The family header of rows judged together: its size is the one every row was judged in (the None
    rows and the copies of a comparison not counted)."""
    sizes = {r.test.family_size for r in rows if r is not None}
    if len(sizes) > 1:
        raise ValueError(f"rows judged in families of different sizes {sorted(sizes)}")
    return Family(sizes.pop() if sizes else 0, family_level, permutations, seed)


def _read_entries(path: Path) -> dict[str, dict]:
    require_file(path, " (run the evaluate stage for this run first)")
    check_whole(path)  # a killed evaluate's half-replaced reports: never compared
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
            permutations: int = 10000, seed: int = 0, runs: list[str] | None = None,
            timing_root: str | Path | None = None) -> Comparisons:
    """Compare every pair on ``measure`` over the queries both runs were evaluated on, as one family.

    When the shared queries fall in both strata (seen: a relevant document is a training
    positive; unseen: none is), each pair is also compared on each stratum, and those rows
    join the family: what fine-tuning gains on documents it never saw is judged under the
    same simultaneous rule as the overall difference.

    ``runs``: the only run names a pair may use (the stage's declared dependencies), so that a
    pair added to params.yaml cannot read a report DVC does not track for this stage.

    ``timing_root``: a folder of ``<run>.json`` (``retrieve --timing``); latency rows are added for the
    pairs whose runs both have one (shown, never judged). Without it no timing is read: wall times differ
    on every run, and the pipeline's compare keeps the same bytes on a rerun.
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
                                 f"its {PER_QUERY} to the compare stage's deps and --runs in dvc.yaml",
                                 field=f"compare.pairs[{i}]")
            if name not in cache:
                path = root / name / PER_QUERY
                entries = _read_entries(path)
                cache[name] = values_of(entries, measure, str(path))
                strata[name] = strata_flags(entries)
    items, where = [], []  # (baseline, candidate) values; (pair index, stratum)
    for i, (a, b) in enumerate(pairs):
        items.append((cache[a], cache[b]))
        where.append((i, ALL))
        if strata[a] is None or strata[b] is None:
            continue
        members = strata_groups(set(cache[a]) & set(cache[b]), strata[a], strata[b])
        if members:
            for name, ids in members.items():
                items.append(({q: cache[a][q] for q in ids}, {q: cache[b][q] for q in ids}))
                where.append((i, name))
    rows = compare_family(items, family_level, permutations, seed)
    out = []
    for (i, stratum), row in zip(where, rows):
        a, b = pairs[i]
        if row is None:
            raise InputError(f"{a} and {b} share no evaluated query", str(root), field=f"compare.pairs[{i}]")
        out.append(PairComparison(a, b, stratum, row))
    latency, untimed = _latency(timing_root, pairs, list(cache)) if timing_root is not None else ((), ())
    return Comparisons(measure, family_of(rows, family_level, permutations, seed), tuple(out), latency, untimed)


def _latency(timing_root: str | Path, pairs: list[list[str]], names: list[str]) -> tuple[tuple, tuple]:
    """The latency rows of the pairs whose runs both have ``<timing_root>/<run>.json``, and the runs without."""
    root = Path(timing_root)
    timings = {name: read_summary(root / f"{name}.json") for name in names if (root / f"{name}.json").is_file()}
    if not timings:  # a wrong folder would otherwise pass for runs that were never timed
        raise InputError(f"holds no <run>.json of the runs compared ({', '.join(names)})", str(root),
                         field="--timing-root")
    rows = tuple(LatencyRow(a, b, timings[a], timings[b]) for a, b in pairs if a in timings and b in timings)
    return rows, tuple(name for name in names if name not in timings)


def _values(per_query: dict[str, dict[str, float]], measure: str) -> dict[str, float]:
    return {q: v[measure] for q, v in per_query.items() if measure in v}


def compare_runs(qrels: dict, base_run: dict, head_run: dict, measures: list[str], family_level: float | None = None,
                 permutations: int | None = None, seed: int | None = None) -> RunsComparison:
    """Two runs on the same qrels, one comparison per measure, the measures as one family: the intervals
    hold together, so reading several measures does not multiply the chances of a false verdict.

    ``family_level``, ``permutations`` and ``seed`` default to params' ``evaluate.ci_level``,
    ``evaluate.permutations`` and ``evaluate.seed``, as ``compare-runs`` uses them.

    Refused (:class:`InputError`), as ``compare-runs`` refuses them in files: a score that is not a finite
    number, a grade that is not an integer, an id a TREC file cannot carry, a run sharing no query with
    ``qrels``, an unknown measure name.
    """
    from .core import checks
    from .core.params import EvaluateParams

    for name in checks.check_measures(measures):
        parse_measure(name)
    checks.check_qrels(qrels)
    for which, run in (("base_run", base_run), ("head_run", head_run)):
        checks.check_run(run, which)
        checks.check_overlap(qrels, run, name=which)

    given = {"ci_level": family_level, "permutations": permutations, "seed": seed}
    try:  # the schema's rules for evaluate.ci_level, .permutations and .seed, as compare-runs reads them
        settings = replace(EvaluateParams(), **{key: v for key, v in given.items() if v is not None})
    except InputError as exc:
        names = {f"evaluate.{key}": arg for key, arg in zip(given, ("family_level", "permutations", "seed"))}
        raise InputError(exc.reason, field=names.get(exc.field, exc.field)) from None
    family_level, permutations, seed = settings.ci_level, settings.permutations, settings.seed
    measures = list(dict.fromkeys(measures))
    base, head = measure_run(qrels, base_run, measures), measure_run(qrels, head_run, measures)
    rows = compare_family([(_values(base.per_query, m), _values(head.per_query, m)) for m in measures],
                          family_level, permutations, seed)
    for measure, row in zip(measures, rows):
        if row is None:  # both runs are measured on the same queries: none of them defines it
            raise InputError(f"{measure} is defined for no query of the qrels (none has a judgment >= "
                             f"{parse_measure(measure).rel}): nothing to compare", field="--measure")
    return RunsComparison(family_of(rows, family_level, permutations, seed), dict(zip(measures, rows)),
                          {"base": base.coverage, "head": head.coverage})


# ----------------------------------------------------------------------------- a row's text


class RowCells(NamedTuple):
    """Every cell a table shows of one comparison row, formatted once."""

    queries: str
    baseline_mean: str
    candidate_mean: str
    difference: str
    interval: str
    p: str
    mde: str
    win_tie_loss: str
    verdict: str


def difference_text(row: Mapping) -> str:
    return f"{row['mean_difference']:+.4f}"


def interval_text(row: Mapping) -> str:
    return f"[{row['ci_low']:+.4f}, {row['ci_high']:+.4f}]"


def mde_text(mde: float) -> str:
    return "-" if math.isnan(mde) else f"±{mde:.4f}"


def row_cells(row: ComparisonRow) -> RowCells:
    """The text of ``row`` for every table: the only place a comparison's numbers are formatted."""
    return RowCells(str(row.test.queries), f"{row.baseline_mean:.4f}", f"{row.candidate_mean:.4f}",
                    difference_text(row), interval_text(row), f"{row.test.p_adjusted:.4f}", mde_text(row.test.mde),
                    f"{row.wins}/{row.ties}/{row.losses}", row.verdict())


def rule_sentence(family: Family, what: str) -> str:
    """How the intervals and p-values of a family were made, for every markdown output."""
    level = family.family_level
    return (f"{level:.0%} simultaneous intervals across the {family.size} {what} "
            f"({stats.ADJUSTMENT.capitalize()}: {family.level:.2%} each). Each interval holds the shifts that a "
            f"paired randomization test ({family.permutations} random sign assignments, seed {family.seed}) does "
            f"not reject at that level, and p is that test's p at 0, adjusted the same way: p <= {1 - level:.2f} "
            "exactly when the interval excludes 0. MDE: the smallest true difference found with "
            f"{stats.POWER:.0%} power at that level over that many queries; the verdict follows from the "
            "interval alone, so a difference inside the MDE can still be significant, and a true difference "
            "below it is often missed: no significant difference there does not show there is none.")


def rough_tail_note(rows: Iterable[ComparisonRow], family: Family) -> list[str]:
    rows = list(rows)
    notes = []
    if any(math.isinf(r.test.low) or math.isinf(r.test.high) for r in rows):
        notes.append("\nNote: an unbounded interval (its MDE ±inf) means too few queries for that level: not even "
                     "a difference of the same sign on every query could be told from noise.")
    if any(r.test.tail < 10 for r in rows):
        notes.append(f"\nNote: fewer than 10 sign flips beyond each end of some intervals; raise "
                     f"evaluate.permutations (now {family.permutations}) for steadier interval ends.")
    return notes


def to_markdown(result: Comparisons) -> str:
    """The compare stage's markdown: one table row per comparison of the family."""
    m, level = result.measure, result.family.family_level
    stratified = any(r.stratum != ALL for r in result.rows)
    lines = [f"# Paired comparison on {m}", "",
             ("Difference = candidate - baseline over the queries both were evaluated on; "
              + rule_sentence(result.family, "comparisons below")), ""]
    if stratified:
        lines += [("Queries: *seen* when one of its relevant documents is a positive of a training query, "
                  "*unseen* otherwise; the unseen rows say what fine-tuning carries over to documents it "
                  "never saw."), ""]
    lines += [(f"| baseline | candidate | queries | baseline {m} | candidate {m} | difference | "
               f"{level:.0%} simultaneous interval | p ({stats.ADJUSTMENT}) | MDE | win/tie/loss | verdict |"),
              "|---|---|---:|---:|---:|---:|---|---:|---:|---|---|"]
    for r in result.rows:
        c = row_cells(r.row)
        queries = c.queries if r.stratum == ALL else f"{c.queries} {r.stratum}"
        lines.append(f"| {r.baseline} | {r.candidate} | {queries} | {c.baseline_mean} | {c.candidate_mean} | "
                     f"{c.difference} | {c.interval} | {c.p} | {c.mde} | {c.win_tie_loss} | {c.verdict} |")
    for r in result.rows:
        if r.stratum == ALL and r.row.queries_only_in_one:
            lines.append(f"\nNote: {r.row.queries_only_in_one} queries were evaluated for only one of "
                         f"{r.baseline} and {r.candidate} and are left out of that pair.")
    lines += rough_tail_note([r.row for r in result.rows], result.family)
    lines += markdown_rows(list(result.latency))
    if result.untimed:
        lines.append(f"\nNot timed (no timing file): {', '.join(result.untimed)}.")
    return "\n".join(lines) + "\n"


def runs_to_text(result: RunsComparison, base_name: str, head_name: str) -> str:
    """The ``compare-runs`` table: one line per measure."""
    header = ["measure", "queries", "base", "head", "difference", "interval", f"p ({stats.ADJUSTMENT})",
              "MDE", "win/tie/loss", "verdict"]
    rows = [[m, *row_cells(r)] for m, r in result.measures.items()]
    widths = [max(len(x[i]) for x in [header] + rows) for i in range(len(header))]
    text = ["  ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip() for x in [header] + rows]
    text.insert(1, "  ".join("-" * w for w in widths))
    notes = [n.strip() for n in rough_tail_note(result.measures.values(), result.family)]
    coverage = [f"{side}: {result.coverage[side].sentence()}" for side in ("base", "head")]
    return "\n".join([f"base (baseline): {base_name}   head (candidate): {head_name}   difference = head - base",
                      *text, "",
                      rule_sentence(result.family, "measures"), *notes, *coverage]) + "\n"
