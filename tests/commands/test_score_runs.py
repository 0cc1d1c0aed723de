"""``score-runs`` takes ``--params`` and ``--set`` like every other measuring command: without ``-m`` it
measures the params' ``evaluate.measures`` (a user who runs every command with ``--params params.yaml``
measures the same list everywhere); a bad params file is refused even when ``-m`` names the measures."""

from __future__ import annotations

import json

import pytest
from command_runner import run_command

QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq2\td4\t1\n"
RUN = "q1 Q0 d2 1 3.0 t\nq1 Q0 d1 2 2.0 t\nq2 Q0 d4 1 1.0 t\n"  # q1: positive at rank 2; q2: at rank 1


@pytest.fixture
def files(tmp_path):
    (tmp_path / "qrels.tsv").write_text(QRELS, encoding="utf-8")
    (tmp_path / "run.trec").write_text(RUN, encoding="utf-8")
    (tmp_path / "params.yaml").write_text("evaluate:\n  measures: [RR, P@1]\n", encoding="utf-8")
    return tmp_path


def _scores(argv, capsys) -> dict:
    assert run_command("score-runs", argv) == 0
    return json.loads(capsys.readouterr().out)["run.trec"]


def test_the_params_measures_are_the_default(files, capsys):
    qrels, run, params = (str(files / n) for n in ("qrels.tsv", "run.trec", "params.yaml"))
    out = _scores([qrels, run, "--params", params, "--json"], capsys)
    # RR: (1/2 + 1) / 2; P@1: (0 + 1) / 2; Judged@1 added at the largest cutoff: q1's d2 and q2's d4 judged
    assert {m: out[m] for m in ("RR", "P@1", "Judged@1")} == {"RR": 0.75, "P@1": 0.5, "Judged@1": 1.0}
    assert "nDCG@10" not in out
    assert _scores([qrels, run, "--params", params, "-m", "RR", "--json"], capsys)["RR"] == 0.75  # -m wins
    assert "P@1" not in _scores([qrels, run, "--params", params, "-m", "RR", "--json"], capsys)
    set_ = _scores([qrels, run, "--set", "evaluate.measures=[P@1]", "--json"], capsys)
    assert set_["P@1"] == 0.5 and "RR" not in set_


def test_a_bad_params_file_is_refused_even_with_measures_given(files, capsys):
    (files / "bad.yaml").write_text("evaluate:\n  nope: 1\n", encoding="utf-8")
    argv = [str(files / "qrels.tsv"), str(files / "run.trec"), "-m", "RR", "--params", str(files / "bad.yaml")]
    assert run_command("score-runs", argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.yaml" in err[0] and "evaluate.nope" in err[0], err
