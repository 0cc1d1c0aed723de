import json

import pytest
from command_runner import run_command

from retrieval_lab.comparison import compare_family

# Six queries, one positive each (d<i>). Base finds it at rank 1 for q0-q2 and rank 2 for q3-q5;
# head at rank 1 for q0-q4 and not at all for q5.
#   Success@1  base 1,1,1,0,0,0 (mean 0.5)     head 1,1,1,1,1,0 (mean 5/6): +1/3, 2 wins 4 ties
#   RR@10      base 1,1,1,.5,.5,.5 (0.75)      head 1,1,1,1,1,0 (5/6):      +1/12, 2 wins 3 ties 1 loss
QRELS = "".join(f"q{i} 0 d{i} 1\n" for i in range(6))


def run_file(path, first_rank):
    lines = []
    for i in range(6):
        docs = [f"x{i}a", f"x{i}b", f"x{i}c"]
        if first_rank[i] is not None:
            docs.insert(first_rank[i] - 1, f"d{i}")
        lines += [f"q{i} Q0 {d} {r} {10 - r} t\n" for r, d in enumerate(docs, start=1)]
    path.write_text("".join(lines))
    return str(path)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "qrels.txt").write_text(QRELS)
    base = run_file(tmp_path / "base.trec", [1, 1, 1, 2, 2, 2])
    head = run_file(tmp_path / "head.trec", [1, 1, 1, 1, 1, None])
    params = tmp_path / "params.yaml"
    params.write_text("evaluate:\n  permutations: 3000\n  seed: 4\n")
    return str(tmp_path / "qrels.txt"), base, head, str(params)


def test_json_by_hand(files, capsys):
    qrels, base, head, params = files
    assert run_command("compare-runs", [qrels, base, head, "-m", "Success@1", "-m", "RR@10", "--json",
                                        "--params", params]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["adjustment"], out["family_size"], out["permutations"], out["seed"]) == ("bonferroni", 2, 3000, 4)
    s1, rr = out["measures"]["Success@1"], out["measures"]["RR@10"]
    assert (s1["baseline_mean"], s1["candidate_mean"]) == pytest.approx((0.5, 5 / 6))
    assert s1["mean_difference"] == pytest.approx(1 / 3) and (s1["wins"], s1["ties"], s1["losses"]) == (2, 4, 0)
    assert (rr["baseline_mean"], rr["candidate_mean"]) == pytest.approx((0.75, 5 / 6))
    assert rr["mean_difference"] == pytest.approx(1 / 12) and (rr["wins"], rr["ties"], rr["losses"]) == (2, 3, 1)
    for row in (s1, rr):  # the one rule: the verdict follows the interval, and p agrees with it
        assert (row["p_adjusted"] <= 0.05) == (row["ci_low"] > 0 or row["ci_high"] < 0)
    # Success@1: differences (0,0,0,1,1,0); |sum of signed d| reaches 2 only when q3 and q4 share a
    # sign: exact p = 1/2, adjusted min(1, 2 * 1/2) = 1 (sampled: near it). Six queries cannot show anything at 97.5%
    # (the smallest exact p, 2 / 64, is above 0.025): the interval is the whole line and the MDE says why
    assert abs(s1["p_value"] - 0.5) < 4 * (0.25 / 3000) ** 0.5
    assert s1["p_adjusted"] == pytest.approx(min(1.0, 2 * s1["p_value"])) and s1["p_adjusted"] > 0.9
    assert (s1["ci_low"], s1["ci_high"]) == (float("-inf"), float("inf"))
    assert s1["verdict"] == "no significant difference" and s1["mde"] == float("inf")
    assert run_command("compare-runs", [qrels, base, head, "-m", "Success@1", "-m", "RR@10", "--params",
                                        params]) == 0
    assert "Note: an unbounded interval (its MDE ±inf) means too few queries" in capsys.readouterr().out


def test_same_numbers_as_the_compare_stage_engine(files, capsys):
    from retrieval_lab.core.data import read_qrels
    from retrieval_lab.metrics import measure_run
    from retrieval_lab.runs import read_run

    qrels, base, head, params = files
    run_command("compare-runs", [qrels, base, head, "-m", "RR@10", "--json", "--params", params])
    out = json.loads(capsys.readouterr().out)["measures"]["RR@10"]
    q = read_qrels(qrels)
    a = {k: v["RR@10"] for k, v in measure_run(q, read_run(base), ["RR@10"]).per_query.items()}
    b = {k: v["RR@10"] for k, v in measure_run(q, read_run(head), ["RR@10"]).per_query.items()}
    (expected,) = compare_family([(a, b)], 0.95, 3000, 4)
    assert out == expected.to_json()


def test_table(files, capsys):
    qrels, base, head, params = files
    assert run_command("compare-runs", [qrels, base, head, "-m", "Success@1", "--params", params]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].endswith("difference = head - base")
    assert lines[1].split() == ["measure", "queries", "base", "head", "difference", "interval", "p",
                                "(bonferroni)", "MDE", "win/tie/loss", "verdict"]
    row = lines[3].split()
    assert row[:5] == ["Success@1", "6", "0.5000", "0.8333", "+0.3333"]
    assert row[-4:] == ["2/4/0", "no", "significant", "difference"]
    assert "95% simultaneous intervals across the 1 measures" in text
    assert "[-inf, +inf]" not in text  # one measure at 95%: six queries are enough (2 / 64 < 0.05)


def test_bad_measure_and_missing_file_are_clear(files, capsys):
    qrels, base, head, _ = files
    assert run_command("compare-runs", [qrels, base, head, "-m", "nDCG@x"]) == 2
    assert "cutoff 'x' is not a positive integer" in capsys.readouterr().err
    assert run_command("compare-runs", [qrels, base, head + ".missing", "-m", "RR@10"]) == 2
    assert "head.trec.missing: file not found" in capsys.readouterr().err


def test_every_query_left_out_is_counted_for_both_runs(tmp_path, capsys):
    # q1 judged d1, q2 judged d3 (grade 2), q4 judged only non-relevant; q9 judged by nobody.
    # base ranks q1, q2, q4, q9; head lacks q2 (scored 0). The mean covers q1 and q2 for both runs:
    # q4 has no positive (excluded), q9 is not in the qrels (ignored), q2 is absent from head.
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq2 0 d3 2\nq4 0 d2 0\n")
    (tmp_path / "base.trec").write_text("".join(f"{q} Q0 {d} 1 3.0 t\n"
                                                for q, d in [("q1", "d1"), ("q2", "d3"), ("q4", "d2"), ("q9", "d2")]))
    (tmp_path / "head.trec").write_text("".join(f"{q} Q0 {d} 1 3.0 t\n"
                                                for q, d in [("q1", "d1"), ("q4", "d2"), ("q9", "d2")]))
    args = [str(tmp_path / name) for name in ("qrels.txt", "base.trec", "head.trec")] + ["-m", "nDCG@10"]
    assert run_command("compare-runs", args + ["--json"]) == 0
    coverage = json.loads(capsys.readouterr().out)["coverage"]
    expected = {"queries_evaluated": 2, "queries_without_positive": 1, "run_queries_not_in_qrels": 1}
    assert coverage["base"] == {**expected, "judged_queries_absent_from_run": 0}
    assert coverage["head"] == {**expected, "judged_queries_absent_from_run": 1}
    assert run_command("compare-runs", args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert ("head: 2 queries evaluated; 1 without a positive (excluded); 1 judged but absent from the run "
            "(scored 0); 1 run queries not in the qrels (ignored)") in lines
    assert any(line.startswith("base: 2 queries evaluated;") for line in lines)


def test_a_measure_no_query_defines_is_refused_not_dropped(files, capsys):
    # every judgment is grade 1: R(rel=2)@1 is defined for none of the six queries
    qrels, base, head, params = files
    assert run_command("compare-runs", [qrels, base, head, "-m", "Success@1", "-m", "R(rel=2)@1",
                                        "--params", params]) == 2
    captured = capsys.readouterr()
    assert "R(rel=2)@1 is defined for no query" in captured.err and "--measure" in captured.err
    assert captured.out == ""
