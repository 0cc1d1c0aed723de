import json

import pytest
from command_runner import run_command

from retrieval_lab.comparison import compare, to_markdown
from retrieval_lab.core.errors import InputError

# sixteenths: every difference is exact in binary floating point
A = [1, 2, 3, 4, 5, 6, 7, 8]
D_AB = [2, 1, 3, 1, 2, 2, 1, 0]  # b better on 7 queries, tied on 1; mean 12/8/16 = 0.09375
D_AC = [1, -1, 1, -1, 1, -1, 0, 0]  # c: 3 wins, 2 ties, 3 losses; mean 0


def write_reports(root, measure="nDCG@10"):
    runs = {"a": A, "b": [x + d for x, d in zip(A, D_AB)], "c": [x + d for x, d in zip(A, D_AC)]}
    for name, values in runs.items():
        queries = {f"q{i}": {"measures": {measure: v / 16}, "first_positive_rank": 1, "positive_ranks": {}}
                   for i, v in enumerate(values)}
        (root / name).mkdir(parents=True)
        (root / name / "per_query.json").write_text(json.dumps({"queries": queries}))
    return root


def test_compare_by_hand(tmp_path):
    root = write_reports(tmp_path / "reports")
    result = compare(root, [["a", "b"], ["a", "c"]], "nDCG@10", ci_level=0.95, resamples=2000,
                     permutations=5000, seed=5)
    ab, ac = result["pairs"]["a vs b"], result["pairs"]["a vs c"]
    assert ab["baseline_mean"] == pytest.approx(36 / 8 / 16)  # (1 + ... + 8) / 8 / 16
    assert ab["candidate_mean"] == pytest.approx((36 + 12) / 8 / 16)
    assert ab["mean_difference"] == pytest.approx(12 / 8 / 16)
    assert (ab["wins"], ab["ties"], ab["losses"]) == (7, 1, 0)
    assert (ac["wins"], ac["ties"], ac["losses"]) == (3, 2, 3)
    # exact (2^8 = 256 <= 5000 sign flips): |sum| = 12/16 only with the seven nonzero
    # differences all of one sign; the zero one is free: 2 * 2 / 256
    assert ab["p_value"] == 4 / 256
    assert ac["p_value"] == 1.0  # observed sum 0: every assignment is as extreme
    # Holm over two pairs: 0.015625 * 2 = 0.03125, then max(0.03125, 1.0 * 1) = 1
    assert (ab["p_holm"], ac["p_holm"]) == pytest.approx((0.03125, 1.0))
    assert 0 < ab["ci_low"] < ab["mean_difference"] < ab["ci_high"]
    assert ab["verdict"] == "candidate better (CI excludes 0)"
    assert ac["ci_low"] < 0 < ac["ci_high"] and ac["verdict"] == "no significant difference"
    assert ab["queries"] == 8 and ab["queries_only_in_one"] == 0


def test_compare_is_reproducible_and_markdown_is_readable(tmp_path):
    root = write_reports(tmp_path / "reports")
    first = compare(root, [["a", "b"]], "nDCG@10", seed=1)
    assert compare(root, [["a", "b"]], "nDCG@10", seed=1) == first
    text = to_markdown(first)
    assert text.startswith("# Paired comparison on nDCG@10")
    row = next(line for line in text.splitlines() if line.startswith("| a | b |"))
    assert "| 8 | 0.2812 | 0.3750 | +0.0938 |" in row  # 4.5/16, 6/16, 1.5/16
    assert row.endswith("| 7/1/0 | candidate better (CI excludes 0) |")


def test_baseline_better_verdict(tmp_path):
    root = write_reports(tmp_path / "reports")
    row = compare(root, [["b", "a"]], "nDCG@10")["pairs"]["b vs a"]
    assert row["ci_high"] < 0 and row["verdict"] == "baseline better (CI excludes 0)"


def test_compare_errors_name_the_file(tmp_path):
    root = write_reports(tmp_path / "reports")
    with pytest.raises(InputError, match=r"per_query.json field 'queries.q0.measures': no value for 'RR'"):
        compare(root, [["a", "b"]], "RR")
    with pytest.raises(InputError, match=r"missing/per_query.json: file not found"):
        compare(root, [["a", "missing"]], "nDCG@10")
    with pytest.raises(InputError, match=r"compare.pairs\[0\]"):
        compare(root, [["a"]], "nDCG@10")


def test_compare_command(tmp_path, capsys):
    root = write_reports(tmp_path / "reports")
    params = tmp_path / "params.yaml"
    params.write_text("evaluate:\n  resamples: 500\n  seed: 3\ncompare:\n  pairs: [[a, b], [a, c]]\n"
                      "  measure: nDCG@10\n")
    argv = ["--reports-root", str(root), "--output", str(tmp_path / "m" / "compare.json"),
            "--markdown", str(root / "compare.md"), "--params", str(params)]
    assert run_command("compare", argv) == 0
    saved = json.loads((tmp_path / "m" / "compare.json").read_text())
    assert saved["resamples"] == 500 and saved["seed"] == 3
    assert saved["pairs"]["a vs b"]["p_value"] == 4 / 256
    assert (root / "compare.md").read_text() == capsys.readouterr().out
