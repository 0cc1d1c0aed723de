"""The gate's family is declared, not accidental (issue 51).

The same change read -0.183 [-0.346, -0.028] (a regression, exit 1) with one retriever changed and
-0.183 [-0.375, +0.000] (exit 0) once its HTTP copy, with identical per-query values, was declared too:
every retriever that changed joined one Bonferroni family, so declaring more switched the gate off.
Now the family is the changed retrievers ``gate.retrievers`` names (default: all) times the gated
measures, identical comparisons counted once. Hypothesis draws retrievers, a declaration and a
retriever added or removed, and checks that no gated retriever's verdict moves.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval_lab.core.params import GateParams, Params
from retrieval_lab.reporting.gather import Gathered, ReportPaths, Retriever, changed_fields
from retrieval_lab.reporting.judge import decide, judge

MEASURES = ["nDCG@10", "R@100", "RR@10"]
BASE_PARAMS = Params(dataset="toy", evaluate=dataclasses.replace(Params().evaluate, measures=MEASURES,
                                                                 permutations=400, seed=3),
                     compare=dataclasses.replace(Params().compare, pairs=[], measure=MEASURES[0],
                                                 key_measures=MEASURES[1:]),
                     train=dataclasses.replace(Params().train, variants={}))


def _params(declared: list[str] | None) -> Params:
    return dataclasses.replace(BASE_PARAMS, gate=GateParams(retrievers=declared))


def _mean(entries: dict, m: str) -> float:
    return sum(e["measures"][m] for e in entries.values()) / len(entries)


def _retriever(name: str, base: dict, head: dict) -> Retriever:
    means = tuple({m: _mean(e, m) for m in MEASURES} for e in (base, head))
    return Retriever(name, (f"main:{name}", f"head:{name}"), base, head, means=means)


def _gathered(retrievers: list[Retriever]) -> Gathered:
    paths = ReportPaths.defaults("toy")
    metrics = {paths.metrics_file(r.name): r.means for r in retrievers}
    return Gathered("main", "head", paths, metrics, *changed_fields(metrics), retrievers)


def _verdicts(retrievers: list[Retriever], declared: list[str] | None) -> tuple[dict[str, set[str]], int]:
    """gated retriever -> the measures on which it regressed, and the gate's exit code."""
    fresh = [_retriever(r.name, r.base, r.head) for r in retrievers]  # judge fills stats: never share them
    j = judge(_gathered(fresh), _params(declared), 0.0)
    regressed: dict[str, set[str]] = {name: set() for name in j.gated}
    for name, m, _ in j.regressions:
        regressed[name].add(m)
    return regressed, decide(j)


@st.composite
def retrievers(draw):
    """2 to 4 changed retrievers over 12 to 30 queries; each loses (or gains) on a drawn share of queries."""
    n = draw(st.integers(12, 30))
    unit = st.floats(0.0, 1.0, allow_nan=False)
    out = []
    for i in range(draw(st.integers(2, 4))):
        shift = draw(st.sampled_from([-0.6, -0.3, 0.0, 0.3]))
        share = draw(st.floats(0.2, 1.0))
        base, head = {}, {}
        for q in range(n):
            b = {m: 0.2 + 0.6 * draw(unit) for m in MEASURES}
            moved = q < share * n
            base[f"q{q:02d}"] = {"measures": b}
            head[f"q{q:02d}"] = {"measures": {m: min(1.0, max(0.0, v + (shift if moved else 0.0) + 0.01 * (q % 3)))
                                              for m, v in b.items()}}
        out.append(_retriever(f"r{i}", base, head))
    return out


SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(retrievers(), st.data())
def test_a_copy_of_a_retriever_never_moves_a_verdict(found, data):
    # declared or not, a retriever and its copy (identical per-query values: the function and its HTTP copy)
    # are one comparison per measure
    declared = data.draw(st.one_of(st.none(), st.lists(st.sampled_from([r.name for r in found]), min_size=1,
                                                       unique=True)))
    original = data.draw(st.sampled_from(found))
    copy = _retriever("copy", original.base, original.head)
    # the copy is declared with its original (an undeclared original's copy stays undeclared)
    with_copy_declared = None if declared is None else [*declared, *(["copy"] if original.name in declared else [])]
    before, code = _verdicts(found, declared)
    after, code_after = _verdicts([*found, copy], with_copy_declared)
    assert {k: v for k, v in after.items() if k != "copy"} == before
    assert code_after == code
    if "copy" in after:
        assert after["copy"] == before[original.name]


@SETTINGS
@given(retrievers(), st.data())
def test_a_retriever_the_gate_does_not_name_never_moves_a_gated_verdict(found, data):
    # adding one (never turns a regression into a pass) and removing one (never a pass into a fail)
    names = [r.name for r in found]
    declared = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names) - 1, unique=True))
    outsider = data.draw(st.sampled_from([r for r in found if r.name not in declared]))
    with_it, code_with = _verdicts(found, declared)
    without, code_without = _verdicts([r for r in found if r is not outsider], declared)
    assert with_it == without and code_with == code_without
    assert set(with_it) <= set(declared)


def test_the_issues_case_a_function_and_its_http_copy():
    # one gated measure (RR@10), 6 of 30 queries lose: the sign-flip p is about 2 / 2**6 = 0.031, under 0.05 alone
    # but over it in a family of two. Counted twice (the old family), the copy switched the gate off
    base = {f"q{i:02d}": {"measures": dict.fromkeys(MEASURES, 0.9)} for i in range(30)}
    head = {q: {"measures": dict.fromkeys(MEASURES, 0.3 if i < 6 else 0.9)} for i, q in enumerate(base)}
    params = dataclasses.replace(BASE_PARAMS, gate=GateParams(measures=["RR@10"]),
                                 evaluate=dataclasses.replace(BASE_PARAMS.evaluate, permutations=4000))

    def gate(*names):
        j = judge(_gathered([_retriever(n, base, head) for n in names]), params, 0.0)
        return j, decide(j)

    alone, code_alone = gate("recipes")
    both, code_both = gate("recipes", "recipes-http")
    assert code_alone == code_both == 1 and alone.family.size == both.family.size == 1
    assert {n for n, *_ in both.regressions} == {"recipes", "recipes-http"}
    (_, _, row_alone), = alone.regressions
    assert [row.test.high for *_, row in both.regressions] == [row_alone.test.high] * 2


def test_a_declared_retriever_without_results_is_a_blind_gate():
    base = {f"q{i:02d}": {"measures": dict.fromkeys(MEASURES, 0.5)} for i in range(20)}
    j = judge(_gathered([_retriever("bm25", base, base)]), _params(["bm25", "recipes"]), 0.0)
    assert decide(j) == 3
    assert j.blind == [("recipes", ("named in gate.retrievers but has no per-query results under reports/toy/ at "
                                   "either revision"))]


@pytest.mark.parametrize("declared", [None, ["r0"]])
def test_the_not_gated_are_reported_in_a_family_of_their_own(declared):
    base = {f"q{i:02d}": {"measures": dict.fromkeys(MEASURES, 0.8)} for i in range(20)}
    worse = {q: {"measures": dict.fromkeys(MEASURES, 0.1 if i < 10 else 0.8)} for i, q in enumerate(base)}
    j = judge(_gathered([_retriever("r0", base, worse), _retriever("r1", base, worse)]), _params(declared), 0.0)
    if declared is None:
        assert j.gated == ("r0", "r1") and not j.reported and j.reported_family is None
    else:
        assert j.gated == ("r0",) and {n for n, *_ in j.reported} == {"r1"} and j.reported_family.size == 1
        assert {n for n, *_ in j.regressions} == {"r0"}


def test_a_gated_measure_the_results_lack_is_a_blind_gate():
    # issue 52: a measure that matches nothing is exit 3 naming it, not an error or a silent skip
    base = {f"q{i:02d}": {"measures": dict.fromkeys(MEASURES, 0.5)} for i in range(20)}
    head = {q: {"measures": dict.fromkeys(MEASURES, 0.4)} for q in base}
    params = dataclasses.replace(BASE_PARAMS, gate=GateParams(measures=["nDCG@10", "AP@5"]))
    j = judge(_gathered([_retriever("bm25", base, head)]), params, 0.0)
    assert decide(j) == 3 and not j.judged
    assert j.blind == [("bm25", ("the gated measures are not in its per-query results: AP@5 at main (20 of 20 "
                                "queries, e.g. q00); AP@5 at head (20 of 20 queries, e.g. q00) (add them to "
                                "evaluate.measures and evaluate again, or gate on measures it has: gate.measures)"))]


@pytest.mark.parametrize("key", ["retrievers", "measures"])
def test_an_empty_declaration_is_refused(key):
    # a hostile try: gate.retrievers: [] exited 3 saying "no per-query results found" when results existed
    from retrieval_lab.core.errors import InputError

    with pytest.raises(InputError, match=f"field 'gate.{key}': name at least a"):
        GateParams(**{key: []})
