"""The judgments that matter, on a fixture built so the verdict flips once the top unjudged documents are judged.

Eight queries. Base ranks b_i then h_i; head ranks h_i then y_i. Only h_i is judged (relevant). On AP@2:
base 1/2 (its relevant document at rank 2), head 1 (at rank 1): head better, +0.5 on every query. Judged
relevant, b_i would give base (1 + 2/2)/2 = 1 and head (1/1)/2 = 1/2: -0.5, base better. Judged relevant,
y_i would give base (1/2)/2 = 1/4 and head (1 + 2/2)/2 = 1: +0.75.
"""

from __future__ import annotations

import dataclasses

import pytest
from judge_fixtures import Assessor

from retrieval_lab.comparison import compare_runs
from retrieval_lab.core.data import Doc, Query
from retrieval_lab.core.params import EvaluateParams, Params
from retrieval_lab.judging import open_session
from retrieval_lab.judging.sensitivity import candidates, sensitivity
from retrieval_lab.judging.server import start
from retrieval_lab.judgment_pool import pool, write_pool
from retrieval_lab.runs import write_run

N = 8
QUERIES = [f"q{i}" for i in range(1, N + 1)]
BASE = {q: {f"b{q[1:]}": 2.0, f"h{q[1:]}": 1.0} for q in QUERIES}
HEAD = {q: {f"h{q[1:]}": 2.0, f"y{q[1:]}": 1.0} for q in QUERIES}
EXISTING = {q: {f"h{q[1:]}": 1} for q in QUERIES}
ARGS = {"measure": "AP@2", "depth": 2, "relevant": 1, "not_relevant": 0, "ci_level": 0.95, "permutations": 2000,
        "seed": 5}


def _report(after=EXISTING, before=EXISTING):
    return sensitivity(BASE, HEAD, before, after, ARGS["measure"], ARGS["depth"], ARGS["relevant"],
                       ARGS["not_relevant"], QUERIES, set(), ARGS["ci_level"], ARGS["permutations"], ARGS["seed"])


def test_the_unjudged_documents_by_their_effect_and_the_range_of_the_difference():
    report = _report()
    first = report.candidates[:N]
    assert [c.doc_id for c in first] == [f"b{i}" for i in range(1, N + 1)]
    assert all((c.base_rank, c.head_rank) == (1, None) and c.effect == pytest.approx(-1 / N) for c in first)
    assert all((c.base_rank, c.head_rank, c.doc_id[0]) == (None, 2, "y") and c.effect == pytest.approx(0.25 / N)
               for c in report.candidates[N:])
    assert report.after.difference == pytest.approx(0.5) and report.after.verdict == "candidate better"
    assert (report.after.judged_base, report.after.judged_head) == (0.5, 0.5)  # Judged@2
    assert report.if_none_relevant.difference == pytest.approx(0.5)
    assert report.if_all_relevant.difference == pytest.approx(0.0)  # both (1 + 2/2)/3
    assert report.if_all_relevant.verdict == "no significant difference"
    assert report.if_favouring_head.difference == pytest.approx(0.75)
    assert report.if_favouring_base.difference == pytest.approx(-0.5)
    assert report.if_favouring_base.verdict == "baseline better"
    assert report.difference_range == pytest.approx((-0.5, 0.75)) and report.verdict_can_change


def test_an_effect_is_the_change_of_the_mean_difference_the_whole_evaluation_gives():
    # a ninth query without any judgment: one document judged relevant adds it to the mean
    base = {**BASE, "q9": {"z9": 1.0}}
    head = {**HEAD, "q9": {"w9": 1.0}}
    qrels = {**EXISTING, "q2": {"h2": 1, "b2": 0}}

    def mean_difference(judged):
        row = compare_runs(judged, base, head, ["AP@2"], 0.95, 10, 0).measures["AP@2"]
        return row.test.mean_difference

    now = mean_difference(qrels)
    found = candidates(qrels, base, head, "AP@2", 2, [*QUERIES, "q9"], 1, set())
    assert ("q2", "b2") not in {c.pair for c in found} and len(found) == 2 * N - 1 + 2
    for c in found:
        trial = {q: dict(j) for q, j in qrels.items()}
        trial.setdefault(c.query_id, {})[c.doc_id] = 1
        assert c.effect == pytest.approx(mean_difference(trial) - now, abs=1e-12), c
    assert found[0].pair == ("q9", "z9")  # it adds a query base wins outright


def test_judging_the_queue_flips_the_verdict(tmp_path):
    """The session offers the judgments that matter first; judging them (b_i relevant, the truth) turns
    "head better" into "base better", which the report shows before and after."""
    queries = {q: Query(q, f"question {q}") for q in QUERIES}
    corpus = {d: Doc(d, d, f"text of {d}") for run in (BASE, HEAD) for docs in run.values() for d in docs}
    write_pool(tmp_path / "pool.tsv", pool({"base": BASE, "head": HEAD}, 2, queries, corpus, EXISTING))
    for name, run in (("base", BASE), ("head", HEAD)):
        write_run(tmp_path / f"{name}.trec", run, name)
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" +
                                        "".join(f"{q}\th{q[1:]}\t1\n" for q in QUERIES))
    params = dataclasses.replace(Params(), evaluate=EvaluateParams(permutations=2000))
    session = open_session(tmp_path / "pool.tsv", tmp_path / "j.sqlite", params, qrels=tmp_path / "qrels.tsv",
                           base=tmp_path / "base.trec", head=tmp_path / "head.trec", measure="AP@2")
    server = start(session)
    try:
        alice = Assessor(server.url, "alice", server.csrf, queue="sensitivity")
        offered = []
        for _ in range(N):
            item = alice.next()["item"]
            offered.append(item["doc_id"])
            alice.label((item["query_id"], item["doc_id"]), 1 if item["doc_id"].startswith("b") else 0)
        assert offered == [f"b{i}" for i in range(1, N + 1)]  # the ones that matter, not the pool's order
        hidden = alice.get("api/sensitivity")
        shown = alice.get("api/sensitivity?reveal=1")
    finally:
        server.shutdown()
        server.server_close()
    assert hidden["candidates"] == [] and len(shown["candidates"]) == N  # the y_i, still unjudged
    assert hidden["before"]["verdict"] == "candidate better" and hidden["before"]["difference"] == pytest.approx(0.5)
    assert hidden["after"]["verdict"] == "baseline better" and hidden["after"]["difference"] == pytest.approx(-0.5)
    assert (hidden["before"]["judged_base"], hidden["after"]["judged_base"]) == (0.5, 1.0)
    assert hidden["before"]["judgments"] == N and hidden["after"]["judgments"] == 2 * N
