"""A closed standard output is an error exit (issue 52, item 4): `score-runs` and `diagnose` started with file
descriptor 1 closed (``>&-``) printed nothing and exited 0, their whole product lost."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from beir_fixtures import REPO, write_beir

CORPUS = [{"_id": f"d{i}", "title": "", "text": f"document about topic {i}"} for i in range(1, 4)]
QUERIES = [{"_id": f"q{i}", "text": f"topic {i}"} for i in range(1, 4)]
RUN = "q2 Q0 d2 1 2.0 t\nq2 Q0 d1 2 1.0 t\nq3 Q0 d3 1 3.0 t\n"


def _closed_stdout(argv: list[str], cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "retrieval_lab.cli", *argv], preexec_fn=lambda: os.close(1),
                          stderr=subprocess.PIPE, text=True, cwd=cwd, env=env, timeout=120, check=False)


@pytest.mark.parametrize("command", ["score-runs", "diagnose"])
def test_a_command_with_stdout_closed_exits_non_zero(tmp_path, command):
    beir = write_beir(tmp_path / "b", CORPUS, QUERIES, {"test": [("q2", "d2", 1), ("q3", "d3", 1)]})
    (tmp_path / "run.trec").write_text(RUN)
    argv = {"score-runs": ["score-runs", str(beir / "qrels" / "test.tsv"), "run.trec", "-m", "nDCG@10"],
            "diagnose": ["diagnose", "--dataset", str(beir), "--run", "run.trec"]}[command]
    done = _closed_stdout(argv, tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("error: standard output is closed (file descriptor 1): what this command prints would be "
                           "lost; redirect it to a file, or to /dev/null to discard it; nothing was done\n")
