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


def test_gzipped_runs_read_and_write_transparently(tmp_path, capsys):
    import gzip
    import json

    from retrieval_lab import cli

    run = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 0.5}}
    plain, packed = tmp_path / "run.trec", tmp_path / "run.trec.gz"
    write_run(plain, run, "t")
    write_run(packed, run, "t")
    assert packed.read_bytes()[:2] == b"\x1f\x8b" and gzip.decompress(packed.read_bytes()) == plain.read_bytes()
    write_run(tmp_path / "again.trec.gz", run, "t")
    assert (tmp_path / "again.trec.gz").read_bytes() == packed.read_bytes()  # no timestamp inside
    assert read_run(packed) == read_run(plain) == run
    # gzip is recognised by content, not by name; a corrupt stream is named, not a traceback
    (tmp_path / "renamed.trec").write_bytes(packed.read_bytes())
    assert read_run(tmp_path / "renamed.trec") == run
    (tmp_path / "cut.trec.gz").write_bytes(packed.read_bytes()[:-12])
    with pytest.raises(InputError, match="unreadable gzip data"):
        read_run(tmp_path / "cut.trec.gz")
    # through the CLI, with gzipped TREC 4-column qrels with CRLF line ends:
    # q1's positive d2 at rank 2 -> RR 1/2; q2's d3 at rank 1 -> RR 1; mean 0.75
    qrels = tmp_path / "qrels.txt.gz"
    qrels.write_bytes(gzip.compress(b"q1 0 d2 1\r\nq2 0 d3 2\r\n"))
    assert cli.main(["score-runs", str(qrels), str(packed), "-m", "RR", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run.trec.gz"]["RR"] == pytest.approx(0.75)


def test_a_leading_byte_order_mark_is_not_part_of_the_first_query_id(tmp_path):
    import gzip

    text = "q1 Q0 d1 1 2.0 t\nq2 Q0 d2 1 1.0 t\n"
    path = tmp_path / "bom.trec"
    path.write_bytes("\ufeff".encode() + text.encode())
    assert read_run(path) == {"q1": {"d1": 2.0}, "q2": {"d2": 1.0}}
    packed = tmp_path / "bom.trec.gz"
    packed.write_bytes(gzip.compress("\ufeff".encode() + text.encode()))
    assert read_run(packed) == {"q1": {"d1": 2.0}, "q2": {"d2": 1.0}}


@pytest.mark.parametrize("line,field,reason", [
    # read by whitespace this is (q, 1, Q0, d1, 1, 2.0): document "Q0" of query "q", score 2.0
    ("q 1\tQ0\td1\t1\t2.0", None, "column 1 'q 1' has spaces inside"),
    ("q1\tQ0\td 1\t1\t2.0\tt", "docid", "column 3 'd 1' has spaces inside"),
    ("q1 Q0 d\u00a01 1 2.0", None, "contains whitespace (U+00A0 NO-BREAK SPACE)"),  # (q1, Q0, d, 1, 1, 2.0)
    ("q1 Q0 d\u00a01 1 2.0 t", "docid", "contains whitespace (U+00A0 NO-BREAK SPACE)"),
    ("q1 Q0 d2 1 1_0 t", "score", "not a number"),  # float() reads 10.0
    ("q1 Q0 d2 1 \u0661 t", "score", "not a number"),  # float() reads 1.0 (Arabic-Indic one)
])
def test_read_run_refuses_columns_it_would_have_to_guess(tmp_path, line, field, reason):
    path = tmp_path / "bad.trec"
    path.write_text(f"q1 Q0 d0 1 0.9 t\n{line}\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_run(path)
    assert (info.value.line, info.value.field) == (2, field) and reason in str(info.value)


@pytest.mark.parametrize("run,tag", [({"q 1": {"d1": 1.0}}, "t"), ({"q1": {"d\t1": 1.0}}, "t"),
                                     ({"q1": {"d1": 1.0}}, "my tag"), ({"q1": {"d1": 1.0}}, "")])
def test_write_run_refuses_what_its_reader_would_refuse(tmp_path, run, tag):
    with pytest.raises(ValueError, match="TREC runs and qrels cannot carry it|one non-empty word"):
        write_run(tmp_path / "r.trec", run, tag=tag)
    assert list(tmp_path.iterdir()) == []
