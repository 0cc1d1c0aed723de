import json
import math
import random

import pytest
import pytrec_eval
from beir_fixtures import write_beir
from command_runner import run_command

from retrieval_lab import metrics
from retrieval_lab.core.data import read_qrels
from retrieval_lab.core.params_file import params_from_dict
from retrieval_lab.evaluation import run_evaluation
from retrieval_lab.runs import write_run

CORPUS = [
    {"_id": "d1", "title": "Router", "text": "How to reset the router password"},
    {"_id": "d2", "title": "Router", "text": "Router firmware update steps"},
    {"_id": "d3", "title": "Spooler", "text": "The print spooler stopped"},
    {"_id": "d4", "title": "Printer", "text": "Printer shows offline status"},
    {"_id": "d5", "title": "Disk", "text": "Disk full warning"},
    {"_id": "d6", "title": "Mail", "text": "Mailbox quota exceeded"},
]
QUERIES = [{"_id": "q1", "text": "reset router password"}, {"_id": "q2", "text": "printer offline"},
           {"_id": "q3", "text": "disk warning"}, {"_id": "q4", "text": "mailbox full"},
           {"_id": "qx", "text": "not judged"}]
QRELS = [("q1", "d1", 1), ("q1", "d2", 0), ("q2", "d3", 2), ("q2", "d4", 1), ("q3", "d5", 0), ("q4", "d6", 1)]
RUN = {
    "q1": {"d2": 3.0, "d1": 2.0, "d5": 1.0},  # d1 (positive) at rank 2
    "q2": {"d5": 3.0, "d6": 2.0, "d4": 1.0},  # d4 at rank 3, d3 not retrieved
    "q3": {"d5": 1.0},  # no positive: excluded
    "qx": {"d1": 1.0},  # not in the qrels: ignored
}  # q4 is judged but absent from the run: scores 0
MEASURES = ["R@1", "R@3", "RR", "nDCG@3", "Judged@2"]


@pytest.fixture
def tiny(tmp_path):
    dataset = write_beir(tmp_path / "ds", CORPUS, QUERIES, {"test": QRELS})
    run_path = tmp_path / "runs" / "sys.trec"
    write_run(run_path, RUN, tag="sys")
    params = params_from_dict({"evaluate": {"measures": MEASURES, "diagnose_k": 1, "judged_threshold": 0.5},
                               "retrieve": {"depth": 3}})
    return dataset, run_path, params


def test_evaluate_stage_writes_hand_checked_numbers(tiny, tmp_path):
    dataset, run_path, params = tiny
    out = run_evaluation(dataset, "test", run_path, tmp_path / "m" / "sys.json", tmp_path / "rep", params).to_json()
    # q1: R@3 1, RR 1/2, nDCG@3 (1/log2 3) / 1; Judged@2 d2, d1 -> 1
    # q2: R@3 1/2 (d4 of d3, d4), RR 1/3, nDCG@3 (1/log2 4) / (2 + 1/log2 3); Judged@2 0
    # q4: absent -> 0 everywhere; q3 excluded (no positive)
    expected = {"R@1": 0.0, "R@3": (1 + 0.5 + 0) / 3, "RR": (1 / 2 + 1 / 3) / 3,
                "nDCG@3": (1 / math.log2(3) + 0.5 / (2 + 1 / math.log2(3))) / 3, "Judged@2": 1 / 3}
    assert {m: out[m] for m in MEASURES} == pytest.approx(expected, abs=1e-12)
    assert json.loads((tmp_path / "m" / "sys.json").read_text()) == out
    assert (out["queries_evaluated"], out["queries_without_positive"], out["judged_queries_absent_from_run"],
            out["run_queries_not_in_qrels"], out["depth"], out["not_found_rank"]) == (3, 1, 1, 1, 3, 4)
    assert out["judged_warning"] is True  # Judged@2 = 0.33 < 0.5

    rep = tmp_path / "rep"
    per_query = json.loads((rep / "per_query.json").read_text())
    assert per_query["depth"] == 3
    assert per_query["queries"]["q2"] == {
        "measures": pytest.approx({"R@1": 0.0, "R@3": 0.5, "RR": 1 / 3,
                                   "nDCG@3": 0.5 / (2 + 1 / math.log2(3)), "Judged@2": 0.0}),
        "first_positive_rank": 3, "positive_ranks": {"d4": 3, "d3": None}, "seen": None}
    # no qrels/train.tsv: no strata at all (not "every query unseen", which would claim training saw none)
    assert "seen" not in out and "unseen" not in out
    assert out["strata_note"] == ("no training split: strata not computed (seen and unseen need judged training "
                                  "queries, qrels/train.tsv; they matter only for a model fine-tuned on that split)")
    assert (rep / "recall_curve.csv").read_text().splitlines() == [
        "k,recall", "1,0.0", f"2,{1 / 3!r}", "3,0.5"]  # q1 found at 2, q2 half at 3
    assert (rep / "first_positive_ranks.csv").read_text().splitlines() == ["query,rank", "q1,2", "q2,3", "q4,4"]
    # q1 rank 2, q2 rank 3, q4 not found: one query in bands 002 and 003, one "not found"
    hist = dict(line.split(",") for line in (rep / "first_positive_hist.csv").read_text().splitlines()[1:])
    assert (hist["001"], hist["002"], hist["003"], hist["004-005"], hist["not found"]) == ("0", "1", "1", "0", "1")
    diagnosis = json.loads((rep / "diagnosis.json").read_text())
    classes = {q["query"]: q["class"] for q in diagnosis["queries"]}
    # q1: top d2 shares "router" only, d1 shares all three tokens -> late; q4 absent -> nothing retrieved
    assert classes == {"q1": "late_rank", "q2": "late_rank", "q4": "no_candidates"}
    assert "## late_rank (2)" in (rep / "diagnosis.md").read_text()
    assert not [p for p in tmp_path.rglob(".*tmp-*")]  # atomic writes left no temporary file


def test_depth_is_the_runs_own_not_retrieve_depth(tiny, tmp_path):
    # the user's retriever called with k = 2, evaluated with params whose retrieve.depth is 10: the run holds
    # two ranks, so "not found" is rank 3, and the curve stops at 2 (a curve to 10 would claim ranks never asked for)
    dataset, _, params = tiny
    short = tmp_path / "k2.trec"
    write_run(short, RUN, tag="k2", depth=2)
    params = params_from_dict({"evaluate": {"measures": MEASURES, "diagnose_k": 1}, "retrieve": {"depth": 10}})
    out = run_evaluation(dataset, "test", short, tmp_path / "m.json", tmp_path / "rep", params).to_json()
    assert (out["depth"], out["not_found_rank"]) == (2, 3)
    assert json.loads((tmp_path / "rep" / "per_query.json").read_text())["depth"] == 2
    # q1's positive at rank 2; q2's d4 was at rank 3, cut: not found, as q4 absent
    assert (tmp_path / "rep" / "first_positive_ranks.csv").read_text().splitlines() == [
        "query,rank", "q1,2", "q2,3", "q4,3"]
    assert (tmp_path / "rep" / "recall_curve.csv").read_text().splitlines() == ["k,recall", "1,0.0", f"2,{1 / 3!r}"]


def test_evaluate_stage_keeps_other_files_in_the_reports_folder(tiny, tmp_path):
    dataset, run_path, params = tiny
    (tmp_path / "rep").mkdir()
    (tmp_path / "rep" / "fusion.json").write_text("{}")  # written there by the fuse stage
    run_evaluation(dataset, "test", run_path, tmp_path / "m.json", tmp_path / "rep", params)
    assert (tmp_path / "rep" / "fusion.json").read_text() == "{}"


def test_evaluate_command(tiny, tmp_path, capsys):
    dataset, run_path, _ = tiny
    params = tmp_path / "params.yaml"
    params.write_text("evaluate:\n  measures: [RR, Judged@2]\n  diagnose_k: 1\n  judged_threshold: 0.5\n")
    argv = ["--dataset", str(dataset), "--split", "test", "--run", str(run_path), "--metrics",
            str(tmp_path / "m.json"), "--reports", str(tmp_path / "rep"), "--params", str(params)]
    assert run_command("evaluate", argv) == 0
    text = capsys.readouterr().out
    assert "RR 0.2778" in text and "WARNING: Judged below 0.5" in text
    assert json.loads((tmp_path / "m.json").read_text())["RR"] == pytest.approx(5 / 18)


def _evaluate_argv(dataset, run_path, metrics, reports):
    return ["--dataset", str(dataset), "--run", str(run_path), "--metrics", str(metrics), "--reports", str(reports)]


def test_a_run_ranking_a_document_outside_the_corpus_is_refused_at_its_line(tiny, tmp_path, capsys):
    dataset, _, _ = tiny
    run_path = tmp_path / "other.trec"  # line 2 ranks d99, which the six-document corpus lacks
    run_path.write_text("q1 Q0 d1 1 3.0 t\nq1 Q0 d99 2 2.0 t\nq2 Q0 d4 1 1.0 t\n")
    assert run_command("evaluate", _evaluate_argv(dataset, run_path, tmp_path / "m.json", tmp_path / "rep")) == 2
    err = capsys.readouterr().err
    assert f"{run_path}:2" in err and "'docid'" in err and "'d99' is not in the dataset's corpus" in err
    assert not (tmp_path / "m.json").exists() and not (tmp_path / "rep").exists()


@pytest.mark.parametrize(("clash", "said"), [
    ("metrics_is_a_report", "overlaps the output --reports"),
    ("run_is_a_report", "is the input --run"),  # a file evaluate writes into --reports
    ("qrels_is_a_report", "is the input --qrels"),
    ("a_report_is_a_folder", "holds diagnosis.md, which retrieval-lab did not write"),
])
def test_every_file_evaluate_writes_is_checked_before_any_work(tiny, tmp_path, clash, said, capsys):
    # each report file inside --reports is an output of its own: it may not be an input, the metrics
    # file, or a folder; refused (exit 2) with nothing written and the inputs untouched
    dataset, run_path, _ = tiny
    reports, metrics_path, argv_tail = tmp_path / "rep", tmp_path / "m.json", []
    reports.mkdir()
    if clash == "metrics_is_a_report":
        metrics_path = reports / "per_query.json"
    elif clash == "run_is_a_report":
        run_path = reports / "diagnosis.md"
        run_path.write_bytes((tmp_path / "runs" / "sys.trec").read_bytes())
    elif clash == "qrels_is_a_report":
        argv_tail = ["--qrels", str(reports / "recall_curve.csv")]
        (reports / "recall_curve.csv").write_text("q1 0 d1 1\n")
    else:
        (reports / "diagnosis.md").mkdir()
    before = {p: p.read_bytes() for p in reports.rglob("*") if p.is_file()}
    assert run_command("evaluate", _evaluate_argv(dataset, run_path, metrics_path, reports) + argv_tail) == 2
    assert said in capsys.readouterr().err
    assert {p: p.read_bytes() for p in reports.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in reports.iterdir()) == sorted(p.name for p in before) + (
        ["diagnosis.md"] if clash == "a_report_is_a_folder" else [])
    assert not (tmp_path / "m.json").exists()


def write_qrels_tsv(path, rows):
    path.write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in rows))
    return path


def test_score_runs_command_json(tiny, tmp_path, capsys):
    dataset, run_path, _ = tiny
    qrels = dataset / "qrels" / "test.tsv"
    assert run_command("score-runs", [str(qrels), str(run_path), "-m", "RR", "-m", "R@3", "--json", "--per-query"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["sys.trec"]
    assert out["sys.trec"]["RR"] == pytest.approx(5 / 18)  # (1/2 + 1/3 + 0) / 3
    # added beside the run: q1 d2, d1 judged of 3; q2 d4 of 3; q4 none
    assert out["sys.trec"]["Judged@3"] == pytest.approx((2 / 3 + 1 / 3 + 0) / 3)
    assert out["sys.trec"]["judged_only"] is False
    assert out["sys.trec"]["per_query"]["q1"] == {"RR": 0.5, "R@3": 1.0, "Judged@3": pytest.approx(2 / 3)}


def test_score_runs_command_table_and_judged_only_label(tiny, tmp_path, capsys):
    dataset, run_path, _ = tiny
    qrels = dataset / "qrels" / "test.tsv"
    assert run_command("score-runs", [str(qrels), str(run_path), "-m", "P@1", "--judged-only"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("JUDGED-ONLY (condensed) evaluation")
    # condensed: q1 -> d2 (0), d1 (1); q2 -> d4 (1); q4 absent.
    # P@1 = (0 + 1 + 0) / 3; Judged@1 = (1 + 1 + 0) / 3
    row = next(line for line in text.splitlines() if line.startswith("sys.trec "))
    assert row.split()[1:] == ["0.3333", "0.6667"]
    assert "3 queries evaluated; 1 without a positive (excluded); 1 judged but absent" in text


def test_score_runs_command_errors(tiny, tmp_path, capsys):
    dataset, run_path, _ = tiny
    qrels = dataset / "qrels" / "test.tsv"
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 d1 1 1.0 x\nq1 Q0 d2 2 oops x\n")
    assert run_command("score-runs", [str(qrels), str(bad), "-m", "RR"]) == 2
    assert f"{bad}:2 field 'score'" in capsys.readouterr().err
    other = tmp_path / "other.trec"
    other.write_text("zz Q0 d1 1 1.0 x\n")
    assert run_command("score-runs", [str(qrels), str(other), "-m", "RR"]) == 2
    assert "shares no query with the qrels" in capsys.readouterr().err
    assert run_command("score-runs", [str(qrels), str(run_path), "-m", "MRR@10"]) == 2
    assert "unknown measure 'MRR@10' (valid: Success@k" in capsys.readouterr().err
    badq = tmp_path / "q.tsv"
    badq.write_text("q1 0 d1\n")
    assert run_command("score-runs", [str(badq), str(run_path), "-m", "RR"]) == 2
    assert f"{badq}:1" in capsys.readouterr().err


def test_scifact_qrels_against_trec_eval(scifact_dir):
    # the real test qrels with a seeded synthetic run: positives scattered through 100 ranks
    qrels = read_qrels(scifact_dir / "qrels" / "test.tsv")
    rng = random.Random(0)
    docs = sorted({d for judged in qrels.values() for d in judged})
    run = {}
    for qid, judged in qrels.items():
        picked = set(rng.sample(docs, 95)) | {d for d in judged if rng.random() < 0.7}
        run[qid] = {d: round(rng.random(), 2) for d in picked}  # 2 decimals: ties
    ours = metrics.measure_run(qrels, run, ["nDCG@10", "R@100", "AP", "RR"])
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recall_100", "map", "recip_rank"}).evaluate(run)
    assert ours.coverage.queries_evaluated == len(qrels) == 300
    for name, trec_name in [("nDCG@10", "ndcg_cut_10"), ("R@100", "recall_100"), ("AP", "map"),
                            ("RR", "recip_rank")]:
        for qid in qrels:
            assert ours.per_query[qid][name] == pytest.approx(trec[qid][trec_name], abs=1e-12)


def test_strata_split_seen_from_unseen_queries_with_test_qrels_outside_the_dataset(tmp_path, capsys):
    # The prepared folder holds train qrels only; the test qrels come from a held-out file.
    # q5 is a training query with positive d1, so q1 (relevant d1) is seen; q2 and q4 are unseen.
    queries = QUERIES + [{"_id": "q5", "text": "router password"}]
    dataset = write_beir(tmp_path / "ds", CORPUS, queries, {"train": [("q5", "d1", 1), ("q5", "d3", 0)]})
    heldout = write_beir(tmp_path / "held", CORPUS, queries, {"test": QRELS}) / "qrels" / "test.tsv"
    run_path = tmp_path / "sys.trec"
    write_run(run_path, RUN, tag="sys")
    argv = ["--dataset", str(dataset), "--qrels", str(heldout), "--run", str(run_path), "--metrics",
            str(tmp_path / "m.json"), "--reports", str(tmp_path / "rep"), "--set",
            "evaluate.measures=[RR, R@3]", "--set", "retrieve.depth=3"]
    assert run_command("evaluate", argv) == 0
    out = json.loads((tmp_path / "m.json").read_text())
    # RR: q1 1/2, q2 1/3, q4 0 (absent); d3 judged 0 for q5 is not a training positive, so q2 stays unseen
    assert out["RR"] == pytest.approx((1 / 2 + 1 / 3) / 3)
    assert out["seen"] == pytest.approx({"queries": 1, "RR": 1 / 2, "R@3": 1.0, "Judged@10": 2 / 10})
    assert out["unseen"] == pytest.approx({"queries": 2, "RR": (1 / 3 + 0) / 2, "R@3": (1 / 2 + 0) / 2,
                                           "Judged@10": (1 / 10 + 0) / 2})
    assert "strata_note" not in out
    per_query = json.loads((tmp_path / "rep" / "per_query.json").read_text())["queries"]
    assert {q: e["seen"] for q, e in per_query.items()} == {"q1": True, "q2": False, "q4": False}
    assert "strata: seen (1 queries) RR 0.5000; unseen (2 queries) RR 0.1667" in capsys.readouterr().out


def test_score_runs_reads_a_bom_prefixed_trec_run_and_qrels_like_the_plain_ones(tiny, tmp_path, capsys):
    # the case: "\ufeffq1" as the first query id lowered nDCG@10 and exited 0
    _, run_path, _ = tiny
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 {d} {s}\n" for q, d, s in QRELS), encoding="utf-8")
    bom_run, bom_qrels = tmp_path / "bom.trec", tmp_path / "bom-qrels.txt"
    bom_run.write_bytes("\ufeff".encode() + run_path.read_bytes())
    bom_qrels.write_bytes("\ufeff".encode() + qrels.read_bytes())
    results = []
    for q, r in [(qrels, run_path), (bom_qrels, bom_run)]:
        assert run_command("score-runs", [str(q), str(r), "-m", "nDCG@3", "--json"]) == 0
        results.append(next(iter(json.loads(capsys.readouterr().out).values())))
    plain, marked = results
    # nDCG@3 = (1/log2 3 + 0.5 / (2 + 1/log2 3) + 0) / 3, as in the stage test above
    assert marked["nDCG@3"] == plain["nDCG@3"] == pytest.approx((1 / math.log2(3) + 0.5 / (2 + 1 / math.log2(3))) / 3)
    assert marked["run_queries_not_in_qrels"] == plain["run_queries_not_in_qrels"] == 1  # qx only


def test_score_runs_refuses_the_same_run_twice(tiny, tmp_path, capsys, monkeypatch):
    dataset, run_path, _ = tiny
    qrels = dataset / "qrels" / "test.tsv"
    assert run_command("score-runs", [str(qrels), str(run_path), str(run_path), "-m", "RR"]) == 2
    assert "run given twice" in capsys.readouterr().err
    monkeypatch.chdir(run_path.parent)  # the same file under two spellings
    assert run_command("score-runs", [str(qrels), "sys.trec", f"../{run_path.parent.name}/sys.trec", "-m", "RR"]) == 2
    assert "run given twice (also as sys.trec)" in capsys.readouterr().err
    copy = tmp_path / "copy.trec"
    copy.write_bytes(run_path.read_bytes())  # a copy is another run: both shown
    assert run_command("score-runs", [str(qrels), str(run_path), str(copy), "-m", "RR", "--json"]) == 0
    assert list(json.loads(capsys.readouterr().out)) == ["sys.trec", "copy.trec"]


def test_every_measure_with_fewer_queries_says_how_many_it_averages(tiny, tmp_path, capsys):
    # R(rel=2)@1 needs a judgment >= 2: only q2 (d3 = 2) of the 3 evaluated queries q1, q2, q4 has one.
    # q2 ranks d5, d6, d4: d3 not retrieved -> R(rel=2)@1 = 0 over 1 query; RR averages all 3.
    dataset, run_path, params = tiny
    qrels = dataset / "qrels" / "test.tsv"
    assert run_command("score-runs", [str(qrels), str(run_path), "-m", "R(rel=2)@1", "-m", "RR"]) == 0
    text = capsys.readouterr().out
    assert "sys.trec: R(rel=2)@1 averages 1 of 3 queries (2 have no judgment >= 2)" in text
    assert "RR averages" not in text and "Judged@1 averages" not in text
    assert run_command("score-runs", [str(qrels), str(run_path), "-m", "R(rel=2)@1", "-m", "RR", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["sys.trec"]
    assert (out["queries_evaluated"], out["queries_evaluated[R(rel=2)@1]"], out["queries_without_positive"],
            out["judged_queries_absent_from_run"], out["run_queries_not_in_qrels"]) == (3, 1, 1, 1, 1)
    assert "queries_evaluated[RR]" not in out and out["R(rel=2)@1"] == 0.0

    # the evaluate stage's metrics JSON: the key only where the count differs (committed files unchanged)
    params = params_from_dict({"evaluate": {"measures": ["R(rel=2)@1", "RR"], "diagnose_k": 1},
                               "retrieve": {"depth": 3}})
    out = run_evaluation(dataset, "test", run_path, tmp_path / "m.json", tmp_path / "rep", params).to_json()
    assert (out["queries_evaluated"], out["queries_evaluated[R(rel=2)@1]"]) == (3, 1)
    assert [k for k in out if k.startswith("queries_evaluated[")] == ["queries_evaluated[R(rel=2)@1]"]
    argv = ["--dataset", str(dataset), "--run", str(run_path), "--metrics", str(tmp_path / "c.json"), "--reports",
            str(tmp_path / "crep"), "--set", "evaluate.measures=[R(rel=2)@1, RR]", "--set", "retrieve.depth=3"]
    assert run_command("evaluate", argv) == 0
    assert "R(rel=2)@1 averages 1 of 3 queries" in capsys.readouterr().out  # the stage says it too
    plain = run_evaluation(dataset, "test", run_path, tmp_path / "p.json", tmp_path / "rep", tiny[2]).to_json()
    assert not [k for k in plain if k.startswith("queries_evaluated[")]
    # a count, not a measure: never compared as one across CPUs nor shown among the PR's measures
    from retrieval_lab.reporting.gather import is_measure_field
    from retrieval_lab.reproducibility import measure_values

    assert set(measure_values(out, "sys")) == {"R(rel=2)@1", "RR", "Judged@1"}
    assert not is_measure_field("queries_evaluated[R(rel=2)@1]")


def test_score_runs_json_writes_null_for_a_measure_no_query_qualifies_for(tiny, capsys):
    # no judgment >= 3 anywhere: R(rel=3)@1 averages 0 queries; NaN is not JSON
    dataset, run_path, _ = tiny
    assert run_command("score-runs", [str(dataset / "qrels" / "test.tsv"), str(run_path), "-m", "R(rel=3)@1",
                                "--json"]) == 0
    out = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert out["sys.trec"]["R(rel=3)@1"] is None and out["sys.trec"]["queries_evaluated[R(rel=3)@1]"] == 0


def test_report_file_names_and_folders_are_the_ones_dvc_yaml_declares():
    # evaluate writes, compare and report read: one set of names (report_files), and the report's default
    # folders (ReportPaths.defaults) are where dvc.yaml puts them
    import re

    import yaml
    from beir_fixtures import REPO

    from retrieval_lab import report_files
    from retrieval_lab.reporting.gather import LOSS_TSV, ReportPaths

    text = (REPO / "dvc.yaml").read_text(encoding="utf-8")
    stages = yaml.safe_load(text)["stages"]
    paths = ReportPaths.defaults("${names.dataset}")

    def option(stage: str, flag: str) -> str:
        return re.search(rf"{flag} (\S+)", " ".join(stages[stage]["do"]["cmd"].split()))[1]

    reports, metrics_file = option("evaluate", "--reports"), option("evaluate", "--metrics")
    run = reports.rsplit("/", 1)[1]  # the foreach variable, e.g. ${item}
    assert reports == f"{paths.reports}/{run}" and metrics_file == paths.metrics_file(run)
    outs = {next(iter(o)) if isinstance(o, dict) else o for o in stages["evaluate"]["do"]["outs"]}
    names = (report_files.PER_QUERY, report_files.RECALL_CURVE, report_files.FIRST_POSITIVE_RANKS,
             report_files.FIRST_POSITIVE_HIST, report_files.DIAGNOSIS, report_files.DIAGNOSIS_MD)
    assert outs == {paths.report_file(run, name) for name in names}
    compare = " ".join(stages["compare"]["cmd"].split())
    assert f"--reports-root {paths.reports} " in compare
    assert f"--output {paths.metrics}/{report_files.COMPARE} " in compare
    live = option("train", "--live-dir")
    assert live.startswith(f"{paths.dvclive}/")
    assert re.search(rf"{re.escape(live.rsplit('/', 1)[0])}/[^/\s]+/{re.escape(LOSS_TSV)}", text)  # the loss plot
