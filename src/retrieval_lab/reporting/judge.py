"""Judge: the statistics of a report and the gate's decision, from what :mod:`.gather` read.

Every changed retriever's key measures are one family of comparisons (``stats.paired_comparison``'s
rule); a regression is a difference whose whole interval lies below -tolerance; a retriever the
gate cannot see (``unjudged``) makes it fail closed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .. import stats
from ..comparison import ComparisonRow, Family, compare_family, family_of, strata_flags, strata_groups
from ..core.errors import InputError
from ..core.params import Params
from ..diagnosis import CLASSES
from ..exit_codes import CANNOT_JUDGE, REGRESSION
from ..metrics import measure_run, parse_measure
from ..report_files import PER_QUERY
from .gather import Gathered, ReportPaths, Retriever

STILL_IN_TOP = "in_top_k"  # a loser the head run still ranks a positive for within diagnose k
NO_DIAGNOSIS = "no_diagnosis"
LOSS_CLASSES = {**CLASSES, STILL_IN_TOP: "a positive is still in the top k, lower than before",
                NO_DIAGNOSIS: "the head revision has no diagnosis.json for this retriever"}

Judged = tuple[str, str, ComparisonRow]  # (retriever, measure or stratum, row)


def key_measures(params: Params) -> list[str]:
    """The measures the report shows and gates: ``gate.measures``, or ``compare.measure`` then
    ``compare.key_measures``, each checked, without repeats."""
    names = list(dict.fromkeys(params.gate.measures or [params.compare.measure] + params.compare.key_measures))
    if not names:
        raise InputError("no measure to gate on", field="gate.measures")
    for name in names:
        parse_measure(name)
    return names


def gated(params: Params, name: str) -> bool:
    """Whether ``gate.retrievers`` (None: every retriever) gates the retriever ``name``."""
    return params.gate.retrievers is None or name in params.gate.retrievers


def check_tolerance(tolerance: float) -> None:
    if not (math.isfinite(tolerance) and tolerance >= 0):  # nan or inf would switch the gate off
        raise InputError(f"tolerance must be a finite number >= 0, got {tolerance}", field="--tolerance")


def number_text(x) -> str:
    if not isinstance(x, float):
        return str(x)  # counts stay counts
    return f"{x:.4f}"


MEAN_TOLERANCE = 1e-9  # a metrics file's mean against its per-query values' mean (float sums differ ~1e-16)


def _query_change(r: Retriever) -> tuple[int, int, int] | None:
    """(vanished at head, new at head, common) when the judged queries differ between the revisions."""
    if r.base is None or r.head is None or set(r.base) == set(r.head):
        return None
    base, head = set(r.base), set(r.head)
    return len(base - head), len(head - base), len(base & head)


def _inconsistent(r: Retriever, key_measures: list[str], paths: ReportPaths) -> list[str]:
    """Why the per-query values cannot be what the gated means were computed from: a value not finite, a
    metrics file missing beside them, or a mean that is not their mean (a partial, renamed or stale
    per_query.json)."""
    out = []
    for which, entries, fields in (("base", r.base, r.means[0]), ("head", r.head, r.means[1])):
        if entries is None:
            continue
        if fields is None:
            out.append(f"no {paths.metrics_file(r.name)} at {which} to hold its per-query values to (is "
                       "--metrics-root the folder evaluate wrote?)")
            continue
        for m in key_measures:
            values = r.values(m, which)
            bad = [q for q, v in values.items() if not math.isfinite(v)]
            if bad:
                out.append(f"{m} at {which} is not a finite number for {len(bad)} queries (e.g. {bad[0]})")
                continue
            mean = fields.get(m)
            if not values:
                continue
            if not isinstance(mean, (int, float)) or isinstance(mean, bool):
                out.append(f"{paths.metrics_file(r.name)} at {which} has no {m} to hold its per-query values to")
                continue
            own = math.fsum(values.values()) / len(values)
            if not (math.isfinite(mean) and abs(own - mean) <= MEAN_TOLERANCE):
                out.append(f"{m} at {which}: the per-query values average {own:.4f} over {len(values)} queries "
                           f"but {paths.metrics_file(r.name)} says {number_text(mean)}")
    return out


def _fell(v: dict, tolerance: float) -> bool:
    old, new = v.get("old"), v.get("new")
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (old, new))
    return numbers and not (new - old >= -tolerance)  # NaN on either side counts as fallen


def _roots_blind(found_roots: dict[str, tuple[int, int]], paths: ReportPaths, revisions: tuple[str, str]
                 ) -> list[tuple[str, str]]:
    """A root that matches nothing at a revision: the reports root no per-query results, or the metrics
    root no metrics file where per-query results were found (the checks that hold per-query values to
    their means would compare nothing)."""
    reports = found_roots.get("--reports-root", (1, 1))
    metrics = found_roots.get("--metrics-root", (1, 1))
    out = [("(all)", f"--reports-root {paths.reports} matches no per-query results (<retriever>/{PER_QUERY}) at {rev}")
           for rev, n_reports in zip(revisions, reports) if not n_reports]
    return out + [("(all)", (f"--metrics-root {paths.metrics} matches no metrics file (<retriever>.json) at {rev}, "
                             f"while {paths.reports} holds per-query results there: nothing to hold them to"))
                  for rev, n_reports, n_metrics in zip(revisions, reports, metrics) if n_reports and not n_metrics]


def unjudged(found: list[Retriever], key_measures: list[str], measures_changed: list[tuple],
             dataset: str, paths: ReportPaths | None = None, allow_query_change: bool = False,
             tolerance: float = 0.0, found_roots: dict[str, tuple[int, int]] | None = None,
             declared: list[str] | None = None, revisions: tuple[str, str] = ("base", "head"),
             skip: set[str] = frozenset()) -> list[tuple[str, str]]:
    """(retriever, why) for every gated retriever the gate cannot judge: it must fail closed on them.

    ``found``: the gated retrievers. Per-query results missing at either revision, or their metrics file
    missing beside them; identical per-query results while the retriever's metrics file changed (stale
    or unpulled per-query files); per-query values that are not finite or do not average to their
    metrics file's mean; a key measure with no query in common, or too few for its interval's upper end
    to be finite (no loss could then be told from noise). No retriever at all, a root that matches
    nothing at a revision (``found_roots``: root option -> files found at base, head) and a ``declared``
    retriever (``gate.retrievers``) that has no results are blind gates too. Judged queries that differ
    between the revisions, unless ``allow_query_change`` (then the common ones are compared, and a gated
    mean of the metrics file that fell by more than ``tolerance`` still cannot be judged).
    ``skip``: retrievers already found blind.
    """
    paths = paths or ReportPaths.defaults(dataset)
    out = _roots_blind(found_roots or {}, paths, revisions)
    names = {r.name for r in found}
    out += [(name, (f"named in gate.retrievers but has no per-query results under {paths.reports}/ at either "
                   "revision")) for name in declared or [] if name not in names]
    if not found:
        return out or [("(all)", f"no per-query results found under {paths.reports}/ at either revision")]
    for r in found:
        if r.name in skip:
            continue
        if r.base is None and r.head is None:
            out.append((r.name, "per-query results missing at both revisions"))
        elif r.base is None or r.head is None:
            out.append((r.name, f"per-query results {r.status}"))
        elif r.status == "unchanged":
            moved = [f"{name} {number_text(old)} → {number_text(new)}" for path, name, old, new, _ in measures_changed
                     if path == paths.metrics_file(r.name)]
            if moved:
                why = f"per-query results identical but {paths.metrics_file(r.name)} changed ({', '.join(moved)})"
                out.append((r.name, why))
        if r.base is not None and r.head is not None:
            change = _query_change(r)
            if change and not allow_query_change:
                vanished, new, common = change
                out.append((r.name, (f"the judged queries changed: {vanished} at base only (vanished at head), "
                                    f"{new} at head only, {common} in common; --allow-query-change compares "
                                    "the common ones")))
            elif change:  # allowed: the common queries are compared, but a gated mean that fell stays unexplained
                fields = {"old": (r.means[0] or {}), "new": (r.means[1] or {})}
                fell = [f"{m} {number_text(fields['old'][m])} → {number_text(fields['new'][m])}" for m in key_measures
                        if m in fields["old"] and m in fields["new"]
                        and _fell({"old": fields["old"][m], "new": fields["new"][m]}, tolerance)]
                if fell:
                    out.append((r.name, (f"the judged queries changed and {paths.metrics_file(r.name)} fell by more "
                                        f"than the tolerance ({', '.join(fell)}): the common queries cannot say "
                                        "whether that is a loss")))
            why = _inconsistent(r, key_measures, paths)
            if why and r.name not in {name for name, _ in out}:  # one reason is enough; the first is the clearest
                out.append((r.name, "; ".join(why)))
        if r.status == "changed":
            lacking = [m for m in key_measures if m not in r.stats]
            if lacking:
                out.append((r.name, f"no query in common for {', '.join(lacking)}"))
            unbounded = [f"{m} ({row.test.queries} queries)" for m, row in r.stats.items()
                         if not math.isfinite(row.test.high)]
            if unbounded:
                why = (f"too few queries to judge {', '.join(unbounded)}: the interval is unbounded, so not even "
                       "a loss on every query could be told from noise")
                out.append((r.name, why))
    return out


def lacking_measures(r: Retriever, measures: list[str], revisions: tuple[str, str]) -> str | None:
    """Why a gated measure cannot be compared: a revision's per-query results lack it for some query."""
    lacking = []
    for rev, entries in zip(revisions, (r.base, r.head)):
        for m in measures:
            without = [q for q, e in (entries or {}).items() if m not in (e.get("measures") or {})]
            if without:
                lacking.append(f"{m} at {rev} ({len(without)} of {len(entries)} queries, e.g. {without[0]})")
    if not lacking:
        return None
    return (f"the gated measures are not in its per-query results: {'; '.join(lacking)} (add them to "
            "evaluate.measures and evaluate again, or gate on measures it has: gate.measures)")


STALE_TOLERANCE = 1e-9  # a per-query value against the one its run gives now (the same engine: equal but for rounding)


def stale(r: Retriever, measures: list[str], runs: tuple, qrels: tuple, revisions: tuple[str, str],
          runs_root: str | None) -> str | None:
    """Why the per-query results cannot be what the gate judges: at a revision holding the retriever's run and
    the judgments, the run scored on them (the one metrics engine) gives other queries or other values than
    its per_query.json: results not evaluated again after the run or the judgments changed."""
    for rev, entries, run, judged in zip(revisions, (r.base, r.head), runs, qrels):
        if entries is None or run is None or judged is None:
            continue
        now = measure_run(judged, run, measures).per_query
        if set(now) != set(entries):
            gone, new = sorted(set(entries) - set(now)), sorted(set(now) - set(entries))
            return (f"its per-query results at {rev} are not what {runs_root}/{r.name}.trec gives on the judgments "
                    f"there ({len(gone)} queries only in the results, {len(new)} only in the run's scores; stale: "
                    "evaluate again)")
        for qid in sorted(now):
            for m in measures:
                have, want = entries[qid]["measures"].get(m), now[qid].get(m)
                if have is None or want is None or abs(float(have) - want) > STALE_TOLERANCE:
                    return (f"its per-query results at {rev} are not what {runs_root}/{r.name}.trec gives on the "
                            f"judgments there (e.g. {qid} {m}: {have} in per_query.json, {want} from the run; "
                            "stale: evaluate again)")
    return None


def vanished_bound(r: Retriever, measures: list[str], family: Family, tolerance: float) -> str | None:
    """Why queries that vanished at head could hide a loss, or None: each vanished query is scored 0 at
    head (the least any measure gives) and the gated measures compared again on every base query, in the
    gate's own family. If that worst case crosses the gate, the common queries alone cannot pass it."""
    vanished = sorted(set(r.base) - set(r.head)) if r.base is not None and r.head is not None else []
    if not vanished or family.size == 0:
        return None
    crossed = []
    for m in measures:
        base, head = r.values(m, "base"), r.values(m, "head")
        queries = sorted(base)
        worst = [head.get(q, 0.0) for q in queries]
        test = stats.paired_comparison([base[q] for q in queries], worst, family.size, family.family_level,
                                       family.permutations, family.seed)
        if test.high < -tolerance:
            crossed.append(f"{m} {test.mean_difference:+.4f} [{test.low:+.4f}, {test.high:+.4f}]")
    if not crossed:
        return None
    return (f"{len(vanished)} judged queries vanished at head (e.g. {vanished[0]}); scored 0 there, the change "
            f"would regress ({'; '.join(crossed)}): the queries in common cannot show it is not a loss")


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


def strata_comparisons(changed: list[Retriever], measure: str, level: float, permutations: int,
                       seed: int) -> tuple[list[Judged], Family | None]:
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
    return [(n, s, row) for (n, s), row in zip(labels, rows)], family_of(rows, level, permutations, seed)


@dataclass
class Judgement:
    """The report's statistics and the gate's decision."""

    measure: str  # the measure losses and strata are shown on
    key_measures: list[str]
    tolerance: float
    family: Family  # the gate's family: every (changed gated retriever, key measure), copies counted once
    judged: list[Judged]  # (retriever, measure, row) in table order: the gated retrievers
    regressions: list[Judged]
    worse: list[Judged]  # below 0 but within the tolerance
    better: list[Judged]
    blind: list[tuple[str, str]]  # (retriever, why) the gate cannot judge
    query_changes: list[tuple[str, int, int, int]]  # (retriever, vanished, new, common), allowed by the user
    strata: list[Judged]
    strata_family: Family | None
    losses: dict[str, dict[str, list[dict]]]  # retriever -> class -> queries that lost
    gated: tuple[str, ...] = ()  # the changed retrievers the gate decides on
    reported: list[Judged] = field(default_factory=list)  # the other changed retrievers: shown, not gated
    reported_family: Family | None = None


def judge(g: Gathered, params: Params, tolerance: float, allow_query_change: bool = False) -> Judgement:
    """Compare the changed gated retrievers' key measures as one family and decide the gate.

    The gate's family is declared: the retrievers ``gate.retrievers`` names (default: every one) that
    changed, times the gated measures; comparisons of identical values count once (a retriever and its
    copy are one test). The other changed retrievers are compared in a family of their own, shown and
    never gated, so adding or removing them cannot move a gated interval."""
    ev, measures = params.evaluate, key_measures(params)
    measure = measures[0]  # losses and strata are shown on the first gated measure
    revisions = (g.base, g.head_name)
    lacking = {r.name: why for r in g.retrievers if (why := lacking_measures(r, measures, revisions))}
    for r in g.retrievers:  # results that are not what their runs give now: never compared as they stand
        if r.name not in lacking and (why := stale(r, measures, g.rankings.get(r.name, (None, None)),
                                                   g.revision_qrels, revisions, g.paths.runs)):
            lacking[r.name] = why
    changed = [r for r in g.changed if r.name not in lacking]  # a measure that matches nothing is a blind spot
    gated_changed = [r for r in changed if gated(params, r.name)]
    others = [r for r in changed if not gated(params, r.name)]
    families = []
    for group in (gated_changed, others):
        items = [(r, m) for r in group for m in measures]
        rows = compare_family([(r.values(m, "base"), r.values(m, "head")) for r, m in items],
                              ev.ci_level, ev.permutations, ev.seed)
        for (r, m), row in zip(items, rows):
            if row is not None:
                r.stats[m] = row
        families.append(family_of(rows, ev.ci_level, ev.permutations, ev.seed))
    judged = [(r.name, m, row) for r in gated_changed for m, row in r.stats.items()]
    reported = [(r.name, m, row) for r in others for m, row in r.stats.items()]
    regressions = [x for x in judged if x[2].test.high < -tolerance]
    strata, strata_family = strata_comparisons(changed, measure, ev.ci_level, ev.permutations, ev.seed)
    gated_found = [r for r in g.retrievers if gated(params, r.name)]
    blind = [(name, why) for name, why in lacking.items() if gated(params, name)]
    blind += unjudged(gated_found, measures, g.measures_changed, params.dataset, g.paths, allow_query_change,
                      tolerance, g.found, params.gate.retrievers, revisions, skip=set(lacking))
    if allow_query_change:
        for r in gated_changed:
            why = vanished_bound(r, measures, families[0], tolerance)
            if why and r.name not in {name for name, _ in blind}:
                blind.append((r.name, why))
    return Judgement(
        measure, measures, tolerance, families[0], judged, regressions,
        worse=[x for x in judged if x[2].test.high < 0 and x not in regressions],
        better=[x for x in judged if x[2].test.low > 0],
        blind=blind,
        query_changes=[(r.name, *c) for r in g.retrievers if (c := _query_change(r))] if allow_query_change else [],
        strata=strata, strata_family=strata_family,
        losses={r.name: losses_by_class(r, measure, g.diagnoses.get(r.name)) for r in changed},
        gated=tuple(r.name for r in gated_changed), reported=reported,
        reported_family=families[1] if others else None)


def decide(j: Judgement) -> int:
    """The gate's exit code: a regression seen wins over a blind spot; 0 only when every retriever was seen."""
    return REGRESSION if j.regressions else CANNOT_JUDGE if j.blind else 0
