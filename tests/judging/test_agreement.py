"""Kappas against hand-worked values and scikit-learn; agreement over a store's state."""

from __future__ import annotations

import math
import random
import warnings

import pytest
from sklearn.metrics import cohen_kappa_score

from retrieval_lab.judging.agreement import agreement, cohen_kappa, fleiss_kappa
from retrieval_lab.judging.store import Judgment, state_of


def test_cohen_kappa_by_hand():
    a = [1, 1, 0, 0, 1, 0, 1, 1, 0, 1]
    b = [1, 0, 0, 0, 1, 1, 1, 1, 0, 1]
    # p_o = 8/10; each says 1 six times in ten: p_e = 0.6*0.6 + 0.4*0.4 = 0.52; (0.8 - 0.52) / 0.48
    assert cohen_kappa(a, b) == pytest.approx(0.28 / 0.48, abs=1e-15)
    assert cohen_kappa(a, a) == 1.0
    assert cohen_kappa([0, 1], [1, 0]) == -1.0  # p_o 0, p_e 0.5


@pytest.mark.parametrize("seed", range(8))
def test_cohen_kappa_equals_scikit_learn(seed):
    rng = random.Random(seed)
    n, labels = rng.randint(2, 40), rng.choice([[0, 1], [0, 1, 2], [0, 1, 2, 3]])
    a = [rng.choice(labels) for _ in range(n)]
    b = [x if rng.random() < 0.6 else rng.choice(labels) for x in a]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one label only: scikit-learn warns, then says nan as we do
        expected = cohen_kappa_score(a, b)
    mine = cohen_kappa(a, b)
    assert (math.isnan(mine) and math.isnan(expected)) or mine == pytest.approx(expected, abs=1e-12)


def test_cohen_kappa_is_nan_where_chance_explains_everything():
    assert math.isnan(cohen_kappa([1, 1, 1], [1, 1, 1]))


def test_fleiss_kappa_by_hand():
    # 3 assessors, 4 items, 2 labels. P_i: 1, 1, (4 + 1 - 3)/6 = 1/3, 1/3 -> P = 2/3;
    # p = (3 + 0 + 2 + 1)/12 = 1/2 each -> P_e = 1/2; kappa = (2/3 - 1/2) / (1/2) = 1/3
    assert fleiss_kappa([[3, 0], [0, 3], [2, 1], [1, 2]]) == pytest.approx(1 / 3, abs=1e-15)


def test_fleiss_kappa_on_fleiss_1971_example():
    # the worked example of Fleiss' kappa (14 raters, 10 subjects, 5 categories) as Wikipedia tabulates it:
    # P = 0.378, P_e = 0.213, kappa = 0.210
    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
             [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    assert fleiss_kappa(table) == pytest.approx(0.210, abs=5e-4)
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([[2, 0], [1, 0]])


def _rows(labels: list[tuple[str, str, str, int]], decisions=()) -> list[Judgment]:
    out = [Judgment(i, a, "label", q, d, label, None, "2026-01-01T00:00:00Z")
           for i, (a, q, d, label) in enumerate(labels, start=1)]
    out += [Judgment(len(out) + i, a, "adjudicate", q, d, label, None, "2026-01-01T00:00:00Z")
            for i, (a, q, d, label) in enumerate(decisions, start=1)]
    return out


PAIRS = [("q1", "d1"), ("q1", "d2"), ("q1", "d3"), ("q2", "d4"), ("q2", "d5")]


def test_agreement_of_two_assessors_is_cohens_and_lists_the_disagreements():
    alice = [1, 0, 1, 1, 0]
    bob = [1, 1, 1, 0, 0]
    rows = _rows([("alice", q, d, x) for (q, d), x in zip(PAIRS, alice)] +
                 [("bob", q, d, x) for (q, d), x in zip(PAIRS, bob)] + [("carol", "q1", "d1", 1)],
                 decisions=[("dana", "q1", "d2", 0)])
    result = agreement(state_of(rows), PAIRS, (0, 1, 2))
    # carol labelled q1/d1 too: three assessors there, so the overall kappa is Fleiss' over the pairs all
    # three labelled (one pair, all 1: NaN); every two are Cohen's
    assert result.assessors == ("alice", "bob", "carol") and result.kappa.name == "fleiss"
    ab = next(p for p in result.pairs if (p.first, p.second) == ("alice", "bob"))
    assert (ab.items, ab.agreeing) == (5, 3) and ab.kappa == pytest.approx(cohen_kappa_score(alice, bob), abs=1e-12)
    assert (result.items, result.agreeing) == (5, 3)
    assert [(d.query_id, d.doc_id, d.decision, d.adjudicator) for d in result.disagreements] == [
        ("q1", "d2", 0, "dana"), ("q2", "d4", None, None)]
    assert result.to_json()["unresolved"] == 1
    per_query = {q.query_id: (q.items, q.agreeing) for q in result.per_query}
    assert per_query == {"q1": (3, 2), "q2": (2, 1)}

    two = agreement(state_of(rows[:10]), PAIRS, (0, 1, 2))  # without carol
    assert two.kappa.name == "cohen" and two.kappa.value == pytest.approx(cohen_kappa_score(alice, bob), abs=1e-12)


def test_agreement_of_three_assessors_is_fleiss():
    labels = {"a": [1, 0, 1, 1, 0], "b": [1, 1, 1, 0, 0], "c": [1, 0, 0, 1, 0]}
    rows = _rows([(name, q, d, x) for name, xs in labels.items() for (q, d), x in zip(PAIRS, xs)])
    result = agreement(state_of(rows), PAIRS, (0, 1))
    counts = [[sum(xs[i] == c for xs in labels.values()) for c in (0, 1)] for i in range(5)]
    assert result.kappa.name == "fleiss" and result.kappa.items == 5
    assert result.kappa.value == pytest.approx(fleiss_kappa(counts), abs=1e-15)
    assert len(result.pairs) == 3
