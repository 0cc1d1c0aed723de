import math
import random

import numpy as np
import pytest
import pytrec_eval

from retrieval_lab import metrics
from retrieval_lab.core.errors import InputError
from retrieval_lab.runs import ranked

CUTOFFS = (1, 2, 3, 5, 10, 20)


def random_case(seed: int, n_queries: int = 40, longest: int = 30):
    """Tie-heavy runs (5 distinct scores) and graded qrels (-2..3) with every awkward case:
    queries without positives, judged queries missing from the run, run-only queries,
    ids whose string order differs from their numeric order."""
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(2 * longest)]
    qrels, run = {}, {}
    for q in range(n_queries):
        qid = f"q{q}"
        judged = rng.sample(docs, rng.randint(1, 12))
        qrels[qid] = {d: rng.choice([-2, -1, 0, 0, 1, 1, 2, 3]) for d in judged}
        if rng.random() < 0.1:
            qrels[qid] = {d: min(r, 0) for d, r in qrels[qid].items()}  # no positive
        if rng.random() < 0.1:
            continue  # judged query absent from the run
        retrieved = rng.sample(docs, rng.randint(1, longest))
        run[qid] = {d: rng.choice([0.1, 0.2, 0.3, 0.4, 0.5]) for d in retrieved}
    run["unjudged-query"] = {"d1": 1.0}
    return qrels, run


def trec_values(qrels, run, measure: str, level: int = 1, judged_only: bool = False):
    # pytrec_eval 0.5.11 segfaults on a query whose judgments are all negative; such
    # queries have no positive, so ours excludes them anyway.
    qrels = {q: j for q, j in qrels.items() if any(r >= 1 for r in j.values())}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {measure}, relevance_level=level,
                                               judged_docs_only_flag=judged_only)
    return {q: v[measure] for q, v in evaluator.evaluate(run).items()}


def truncated(run, k, qrels=None):
    """Top k of each ranking; with qrels, of the condensed ranking (judged >= 0 only, as -J)."""
    if qrels is not None:
        run = {q: {d: s for d, s in docs.items() if qrels.get(q, {}).get(d, -1) >= 0} for q, docs in run.items()}
    return {q: dict(ranked(docs)[:k]) for q, docs in run.items()}


def trec_equivalents(k: int, qrels, judged_only: bool):
    """ours -> (trec_eval measure, relevance level, run transform)."""
    same = lambda run: run
    condense = qrels if judged_only else None
    return {
        f"P@{k}": (f"P_{k}", 1, same),
        f"R@{k}": (f"recall_{k}", 1, same),
        f"Success@{k}": (f"success_{k}", 1, same),
        f"nDCG@{k}": (f"ndcg_cut_{k}", 1, same),
        f"AP@{k}": (f"map_cut_{k}", 1, same),
        f"RR@{k}": ("recip_rank", 1, lambda run: truncated(run, k, condense)),
        f"P(rel=2)@{k}": (f"P_{k}", 2, same),
        f"R(rel=2)@{k}": (f"recall_{k}", 2, same),
        f"Success(rel=2)@{k}": (f"success_{k}", 2, same),
        f"AP(rel=3)@{k}": (f"map_cut_{k}", 3, same),
        "RR": ("recip_rank", 1, same),
        "RR(rel=2)": ("recip_rank", 2, same),
        "AP": ("map", 1, same),
        "AP(rel=2)": ("map", 2, same),
        "nDCG": ("ndcg", 1, same),
    }


def assert_matches_trec(qrels, run, judged_only: bool):
    checked = 0
    for k in CUTOFFS:
        for ours_name, (trec_name, level, transform) in trec_equivalents(k, qrels, judged_only).items():
            ours = metrics.measure_run(qrels, run, [ours_name], judged_only=judged_only)
            trec = trec_values(qrels, transform(run), trec_name, level, judged_only)
            # ours is defined on queries with a judgment >= level; absent from the run they
            # score 0 where pytrec_eval leaves them out.
            defined = {q for q, j in qrels.items() if any(r >= max(level, 1) for r in j.values())}
            assert set(ours.per_query) == {q for q, j in qrels.items() if any(r >= 1 for r in j.values())}
            expected = {q: trec.get(q, 0.0) for q in defined}
            got = {q: v[ours_name] for q, v in ours.per_query.items() if ours_name in v}
            assert got.keys() == expected.keys(), ours_name
            for q, value in expected.items():
                assert got[q] == pytest.approx(value, abs=1e-12), (ours_name, q)
            assert ours.means[ours_name] == pytest.approx(np.mean(list(expected.values())), abs=1e-12)
            checked += 1
    return checked


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_measure_equals_trec_eval_per_query_and_mean(seed):
    qrels, run = random_case(seed)
    assert assert_matches_trec(qrels, run, judged_only=False) == len(CUTOFFS) * 15


def test_long_rankings_equal_trec_eval_too():
    # rankings longer than metrics._COUNTED_IN_PYTHON take the numpy path of the rank count
    qrels, run = random_case(3, n_queries=15, longest=3 * metrics._COUNTED_IN_PYTHON)
    assert max(map(len, run.values())) > metrics._COUNTED_IN_PYTHON
    assert assert_matches_trec(qrels, run, judged_only=False) == len(CUTOFFS) * 15


@pytest.mark.parametrize("seed", [3, 4])
def test_judged_only_equals_trec_eval_minus_J(seed):
    qrels, run = random_case(seed)
    assert_matches_trec(qrels, run, judged_only=True)


def test_the_random_case_really_has_ties_and_negative_labels():
    # The acceptance test above would prove little on a run without ties.
    qrels, run = random_case(0)
    assert any(len(set(d.values())) < len(d) for d in run.values())
    assert any(r < 0 for j in qrels.values() for r in j.values())
    result = metrics.measure_run(qrels, run, ["P@5"])
    assert result.coverage.queries_without_positive > 0
    assert result.coverage.judged_queries_absent_from_run > 0


def test_ties_broken_by_doc_id_descending():
    # all scores equal: order is c, b, a, so the only positive b sits at rank 2
    result = metrics.measure_run({"q": {"b": 1}}, {"q": {"a": 1.0, "b": 1.0, "c": 1.0}}, ["RR", "P@1"])
    assert result.means == {"RR": 0.5, "P@1": 0.0}


def test_exp_gain_ndcg_by_hand():
    qrels = {"q": {"a": 2, "b": 1, "c": 0}}
    run = {"q": {"c": 3.0, "b": 2.0, "a": 1.0}}  # ranks: c=1, b=2, a=3
    inv_log3 = 1 / math.log2(3)  # discount of rank 2
    # exp gains: a 2^2-1 = 3, b 2^1-1 = 1, c 0
    dcg = 1 * inv_log3 + 3 / 2  # b at rank 2, a at rank 3 (log2(4) = 2)
    ideal = 3 + 1 * inv_log3  # a at rank 1, b at rank 2
    # linear gains: a 2, b 1
    dcg_lin, ideal_lin = 1 * inv_log3 + 2 / 2, 2 + 1 * inv_log3
    result = metrics.measure_run(qrels, run, ["nDCG(gain=exp)@3", "nDCG@3", "nDCG(gain=exp)@1"])
    assert result.means["nDCG(gain=exp)@3"] == pytest.approx(dcg / ideal, abs=1e-15)  # 0.58688
    assert result.means["nDCG@3"] == pytest.approx(dcg_lin / ideal_lin, abs=1e-15)  # 0.61990
    assert result.means["nDCG(gain=exp)@1"] == 0.0  # c (gain 0) on top
    assert dcg / ideal == pytest.approx(0.586883, abs=1e-6)  # 2.130930 / 3.630930


def test_sklearn_ndcg_inflates_when_given_only_retrieved_docs():
    from sklearn.metrics import ndcg_score

    qrels = {"q": {"a": 1, "b": 1, "c": 1}}  # three positives, only a retrieved
    run = {"q": {"x": 2.0, "a": 1.0}}
    # sklearn sees just the two retrieved docs: ideal = a first, DCG = 1/log2(3)
    inflated = ndcg_score([[0, 1]], [[2.0, 1.0]], k=10)
    assert inflated == pytest.approx(1 / math.log2(3))  # 0.631
    # ideal over all judged positives: 1 + 1/log2(3) + 1/log2(4) = 2.131
    ours = metrics.measure_run(qrels, run, ["nDCG@10"]).means["nDCG@10"]
    assert ours == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3) + 0.5), abs=1e-12)  # 0.296
    assert ours == pytest.approx(trec_values(qrels, run, "ndcg_cut_10")["q"], abs=1e-12)
    assert inflated > 2 * ours


def test_judged_at_k_counts_non_negative_judgments_over_k():
    qrels = {"q": {"a": 1, "b": 0, "c": -1}}
    run = {"q": {"c": 4.0, "b": 3.0, "x": 2.0, "a": 1.0}}
    # top 3: c (-1: not in pool), b (judged 0), x (unjudged) -> 1/3; top 5: b, a -> 2/5
    result = metrics.measure_run(qrels, run, ["Judged@3", "Judged@5"])
    assert result.means == pytest.approx({"Judged@3": 1 / 3, "Judged@5": 2 / 5})
    condensed = metrics.measure_run(qrels, run, ["Judged@2", "P@1"], judged_only=True)
    assert condensed.means == {"Judged@2": 1.0, "P@1": 0.0}  # b, a remain; b first
    assert condensed.coverage.judged_only is True


def test_query_accounting():
    qrels = {"ok": {"a": 1}, "no_pos": {"a": 0}, "absent": {"b": 2}}
    run = {"ok": {"a": 1.0}, "no_pos": {"a": 1.0}, "extra": {"a": 1.0}}
    result = metrics.measure_run(qrels, run, ["Success@1", "R(rel=2)@1"])
    assert result.means["Success@1"] == 0.5  # ok 1, absent 0; no_pos excluded
    assert result.per_query == {"ok": {"Success@1": 1.0}, "absent": {"Success@1": 0.0, "R(rel=2)@1": 0.0}}
    assert result.means["R(rel=2)@1"] == 0.0  # only "absent" has a rel >= 2 judgment
    r = result.coverage
    assert (r.queries_evaluated, r.queries_without_positive, r.judged_queries_absent_from_run,
            r.run_queries_not_in_qrels) == (2, 1, 1, 1)
    assert r.queries_without_positive_ids == ("no_pos",)
    assert r.judged_queries_absent_from_run_ids == ("absent",)
    assert r.excluded_by_measure == {"R(rel=2)@1": 1} and r.queries_by_measure == {"R(rel=2)@1": 1}
    assert r.counts() == {"queries_evaluated": 2, "queries_without_positive": 1,
                          "judged_queries_absent_from_run": 1, "run_queries_not_in_qrels": 1}
    assert r.query_count_fields() == {"queries_evaluated[R(rel=2)@1]": 1}


def test_no_positive_anywhere_is_an_error():
    with pytest.raises(InputError, match="no query with a positive"):
        metrics.measure_run({"q": {"a": 0}}, {"q": {"a": 1.0}}, ["P@1"])


@pytest.mark.parametrize("name, message", [
    ("MAP@10", "valid: Success@k"), ("P", "needs a cutoff"), ("P@0", "positive integer"),
    ("nDCG(rel=2)@5", "options: gain"), ("nDCG(gain=log)@5", "gain must be"), ("R(rel=0)@5", "rel must"),
    ("Judged(rel=2)@5", "options: none"),
])
def test_parse_measure_errors(name, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        metrics.parse_measure(name)


def test_parse_measure_canonical_names():
    assert metrics.parse_measure("nDCG(gain=lin)@10").name == "nDCG@10"
    m = metrics.parse_measure("R(rel=2)@5")
    assert (m.family, m.cutoff, m.rel, m.name) == ("R", 5, 2, "R(rel=2)@5")
    assert metrics.parse_measure("RR").cutoff is None


def test_positive_ranks_match_the_sorted_run():
    qrels, run = random_case(5)
    got = metrics.positive_ranks(qrels, run)
    first = metrics.first_positive_ranks(qrels, run)
    for qid, ranks in got.items():
        order = [d for d, _ in ranked(run.get(qid, {}))]  # independent: full sort
        for doc, rank in ranks.items():
            assert rank == (order.index(doc) + 1 if doc in order else None)
        found = [r for r in ranks.values() if r is not None]
        assert first[qid] == (min(found) if found else None)
    assert any(v is None for v in first.values()) and any(v is not None for v in first.values())


def test_first_positive_rank_by_hand():
    qrels = {"q": {"a": 1, "b": 2, "c": 0}, "z": {"a": 0}}
    run = {"q": {"c": 3.0, "b": 2.0, "x": 1.0}}
    assert metrics.positive_ranks(qrels, run) == {"q": {"b": 2, "a": None}}
    assert metrics.first_positive_ranks(qrels, run) == {"q": 2}
    assert metrics.first_positive_ranks(qrels, run, rel=2) == {"q": 2}


def test_recall_curve_equals_recall_at_each_k():
    qrels, run = random_case(6)
    curve = metrics.recall_curve(qrels, run, depth=25)
    means = metrics.measure_run(qrels, run, [f"R@{k}" for k in range(1, 26)]).means
    assert curve.shape == (25,)
    np.testing.assert_allclose(curve, [means[f"R@{k}"] for k in range(1, 26)], atol=1e-12)
    assert curve[-1] > curve[0]
