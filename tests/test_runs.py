from __future__ import annotations

import pytest

from retrieval_lab.core.errors import InputError
from retrieval_lab.runs import ranked, read_run, write_run


def test_ranked_uses_trec_eval_tie_rule():
    # equal scores: document ids descending as strings ("d9" > "d10" > "d1")
    assert [d for d, _ in ranked({"d1": 1.0, "d10": 1.0, "d9": 1.0, "a": 2.0})] == ["a", "d9", "d10", "d1"]


def test_write_run_orders_and_breaks_ties_with_strictly_decreasing_scores(tmp_path):
    path = tmp_path / "r.trec"
    write_run(path, {"q2": {"x": 0.5}, "q1": {"a": 1.0, "b": 1.0, "c": 3.0}}, tag="t", depth=2)
    lines = [line.split() for line in path.read_text().splitlines()]
    assert [(l[0], l[2], l[3]) for l in lines] == [("q1", "c", "1"), ("q1", "b", "2"), ("q2", "x", "1")]
    back = read_run(path)
    assert back["q1"]["c"] == 3.0 and back["q1"]["b"] == 1.0
    write_run(path, {"q": {"a": 1.0, "b": 1.0}}, tag="t")
    scores = [float(l.split()[4]) for l in path.read_text().splitlines()]
    assert scores[0] == 1.0 and scores[1] < 1.0 and 1.0 - scores[1] < 1e-15  # b, then a one ulp lower
    assert [l.split()[2] for l in path.read_text().splitlines()] == ["b", "a"]


@pytest.mark.parametrize("line,reason,field", [
    ("q1 Q0 d1 1 0.5", "expected 6 columns", None),
    ("q1 Q0 d1 1 high t", "not a number", "score"),
    ("q1 Q0 d1 1 nan t", "not finite", "score"),
    ("q1 Q0 d1 1 inf t", "not finite", "score"),
    ("q1 Q0 d0 1 0.5 t", "repeated", "docid"),
])
def test_read_run_errors_name_line(tmp_path, line, reason, field):
    path = tmp_path / "bad.trec"
    path.write_text(f"q1 Q0 d0 1 0.9 t\n{line}\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_run(path)
    assert info.value.line == 2 and reason in str(info.value) and info.value.field == field
    assert f"{path}:2" in str(info.value)


def test_write_run_refuses_nan_and_leaves_nothing(tmp_path):
    path = tmp_path / "r.trec"
    with pytest.raises(ValueError):
        write_run(path, {"q": {"a": float("nan")}}, tag="t")
    assert list(tmp_path.iterdir()) == []
