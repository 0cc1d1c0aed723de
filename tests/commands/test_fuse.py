import json

from beir_fixtures import default_params
from command_runner import run_command

from retrieval_lab.runs import read_run, write_run


def _inputs(tmp_path):
    write_run(tmp_path / "a.trec", {"q1": {"x": 3.0, "y": 2.0, "z": 1.0}, "q9": {"x": 1.0}}, "a")
    write_run(tmp_path / "b.trec", {"q1": {"y": 0.9, "v": 0.8, "w": 0.5}}, "b")
    (tmp_path / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tx\t1\n")
    return [str(tmp_path / "a.trec"), str(tmp_path / "b.trec")]


def test_weighted_tuned_on_qrels_writes_run_and_report(tmp_path):
    runs = _inputs(tmp_path)
    argv = ["--method", "weighted", "--runs", *runs, "--qrels", str(tmp_path / "train.tsv"),
            "--output", str(tmp_path / "f.trec"), "--report", str(tmp_path / "r.json"),
            "--params", str(default_params(tmp_path)),
            "--set", "fusion.tune=true", "--set", "fusion.methods.weighted.grid=[0.1, 0.9]"]
    assert run_command("fuse", argv) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    # alpha 0.1 puts x third (nDCG@10 0.5), alpha 0.9 first (1.0); see test_fusion
    assert report["chosen"] == 0.9 and [g["score"] for g in report["grid"]] == [0.5, 1.0]
    fused = read_run(tmp_path / "f.trec")
    assert set(fused) == {"q1", "q9"}  # every query, not only the tuning ones
    assert list(fused["q1"])[:2] == ["x", "y"]
    assert (tmp_path / "f.trec").read_text().split()[5] == "fused-weighted"


def test_rrf_fixed_without_qrels_and_depth_cut(tmp_path):
    runs = _inputs(tmp_path)
    argv = ["--method", "rrf", "--runs", *runs, "--output", str(tmp_path / "f.trec"),
            "--params", str(default_params(tmp_path)), "--set", "fusion.depth=2", "--set", "fusion.methods.rrf.value=1"]
    assert run_command("fuse", argv) == 0
    # k = 1, depth 2: y = 1/(1+2) + 1/(1+1) = 0.8333, x = 1/2, v = 1/3; z and w are beyond depth 2
    fused = read_run(tmp_path / "f.trec")
    assert list(fused["q1"]) == ["y", "x"] and abs(fused["q1"]["y"] - 5 / 6) < 1e-12


def test_bad_method_and_single_run_exit_2(tmp_path):
    runs = _inputs(tmp_path)
    out = str(tmp_path / "f.trec")
    assert run_command("fuse", ["--method", "combmnz", "--runs", *runs, "--output", out]) == 2
    assert run_command("fuse", ["--method", "rrf", "--runs", runs[0], "--output", out]) == 2
