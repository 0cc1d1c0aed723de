"""evaluate's outputs are replaced together (issue 52, item 4): an evaluate killed between two renames left new and
old reports mixed, with nothing to tell them apart. Now the set is recorded in the reports folder from its
first rename to its last (core/atomic.py: atomic_set), so a half-replaced set is detectable, and the next
evaluate completes it before anything else, even one that then fails on its input."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from beir_fixtures import REPO, default_params, write_beir
from test_cli_errors import CORPUS, QRELS, QUERIES

from retrieval_lab import cli, comparison
from retrieval_lab.core.atomic import HOLD_BETWEEN_ENV, REPLACING, WRITTEN
from retrieval_lab.core.errors import InputError

RUN_A = "q2 Q0 d2 1 2.0 t\nq2 Q0 d1 2 1.0 t\nq3 Q0 d3 1 3.0 t\n"
RUN_B = "q2 Q0 d1 1 2.0 t\nq2 Q0 d3 2 1.0 t\nq3 Q0 d2 1 3.0 t\nq3 Q0 d3 2 1.0 t\n"  # every file differs from A's


def _argv(work, reports="rep", metrics="m.json", run="run.trec"):
    return ["evaluate", "--dataset", str(work / "col"), "--run", run, "--metrics", metrics, "--reports", reports,
            "--params", str(work / "defaults.yaml")]


def _set(work, reports="rep", metrics="m.json") -> dict[str, bytes]:
    files = {p.name: p.read_bytes() for p in (work / reports).iterdir() if p.is_file() and p.name != WRITTEN}
    return {**files, "metrics": (work / metrics).read_bytes()}


def test_an_evaluate_killed_between_renames_is_detected_and_completed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_beir(tmp_path / "col", CORPUS, QUERIES, QRELS)
    default_params(tmp_path)
    (tmp_path / "run.trec").write_text(RUN_B)
    assert cli.main(_argv(tmp_path, "rep-b", "m-b.json")) == 0  # what a whole run on B leaves
    new = _set(tmp_path, "rep-b", "m-b.json")
    (tmp_path / "run.trec").write_text(RUN_A)
    assert cli.main(_argv(tmp_path)) == 0
    old = _set(tmp_path)
    assert all(old[name] != new[name] for name in new), "the two sets must differ file by file"

    (tmp_path / "run.trec").write_text(RUN_B)
    env = {**os.environ, HOLD_BETWEEN_ENV: "60",
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-m", "retrieval_lab.cli", *_argv(tmp_path)], cwd=tmp_path, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _set(tmp_path)["per_query.json"] != new["per_query.json"]:
            time.sleep(0.05)  # the first rename done, the child sleeping before the second
        assert child.poll() is None, child.stderr.read()
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    mixed = _set(tmp_path)
    assert mixed["per_query.json"] == new["per_query.json"] and mixed["metrics"] == old["metrics"]  # the mix
    assert (tmp_path / "rep" / REPLACING).is_file()  # ... and it says so: compare refuses to read it
    with pytest.raises(InputError, match="a killed run left half-replaced"):
        comparison.compare(tmp_path, [["rep-b", "rep"]], "nDCG@10", permutations=10)

    # the next evaluate completes the set first: here one that then fails on its run, naming it in one line
    (tmp_path / "other.trec").write_text("x1 Q0 d1 1 2.0 t\n")
    capsys.readouterr()
    assert cli.main(_argv(tmp_path, run="other.trec")) == 2
    assert "shares no query with the qrels" in capsys.readouterr().err
    assert _set(tmp_path) == new  # wholly the killed run's set: every file, the metrics too
    assert not (tmp_path / "rep" / REPLACING).exists()
    comparison.compare(tmp_path, [["rep-b", "rep"]], "nDCG@10", permutations=10)  # whole again: read
    assert [p.name for p in tmp_path.rglob(".*") if "retrieval-lab-" in p.name and p.is_dir()] == []
