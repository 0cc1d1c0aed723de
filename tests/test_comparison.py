import hashlib
import json
import re

import numpy as np
import pytest
from command_runner import run_command

from retrieval_lab.comparison import (
    Comparisons,
    RunsComparison,
    compare,
    compare_family,
    family_of,
    row_cells,
    runs_to_text,
    to_markdown,
)
from retrieval_lab.core.errors import InputError
from retrieval_lab.reporting.gather import Retriever

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
    result = compare(root, [["a", "b"], ["a", "c"]], "nDCG@10", family_level=0.95, permutations=20000,
                     seed=5).to_json()
    ab, ac = result["pairs"]["a vs b"], result["pairs"]["a vs c"]
    assert ab["baseline_mean"] == pytest.approx(36 / 8 / 16)  # (1 + ... + 8) / 8 / 16
    assert ab["candidate_mean"] == pytest.approx((36 + 12) / 8 / 16)
    assert ab["mean_difference"] == pytest.approx(12 / 8 / 16)
    assert (ab["wins"], ab["ties"], ab["losses"]) == (7, 1, 0)
    assert (ac["wins"], ac["ties"], ac["losses"]) == (3, 2, 3)
    # two comparisons, Bonferroni: each interval at 1 - 0.05 / 2 = 97.5%; the interval ends leave
    # j = max{c : 2 (1 + c) / 20001 <= 0.05} = 499 sign assignments beyond them
    assert (result["adjustment"], result["family_size"]) == ("bonferroni", 2)
    assert result["level"] == pytest.approx(0.975) and ab["tail"] == 499
    # sign flips, exactly: |sum| = 12/16 only with the seven nonzero differences all of one sign, the
    # zero one free: 2 * 2 / 256 = 1/64; sampled p = (1 + hits) / 20001, hits ~ Binomial(20000, 1/64)
    assert abs(ab["p_value"] - 1 / 64) < 4 * (1 / 64 * 63 / 64 / 20000) ** 0.5
    assert ab["p_adjusted"] == pytest.approx(2 * ab["p_value"])  # ~0.031 <= 0.05: a real difference
    assert 0 < ab["ci_low"] < ab["mean_difference"] < ab["ci_high"] and ab["verdict"] == "candidate better"
    # a vs c sums to 0: every assignment is as extreme, p = 1, and the interval straddles 0
    assert ac["p_value"] == 1.0 and ac["p_adjusted"] == 1.0
    assert ac["ci_low"] < 0 < ac["ci_high"] and ac["verdict"] == "no significant difference"
    # MDE at 97.5%: d(a, b) in sixteenths (2,1,3,1,2,2,1,0), mean 1.5, squared deviations sum to 6,
    # sd (n - 1) = sqrt(6 / 7) / 16 = 0.0578638; (z_0.9875 + z_0.8) = 2.241403 + 0.841621 = 3.083024;
    # 3.083024 * 0.0578638 / sqrt(8) = 0.0630723
    assert ab["mde"] == pytest.approx(0.0630723, rel=1e-5)
    assert ab["queries"] == 8 and ab["queries_only_in_one"] == 0


def test_compare_is_reproducible_and_markdown_is_readable(tmp_path):
    root = write_reports(tmp_path / "reports")
    first = compare(root, [["a", "b"]], "nDCG@10", permutations=2000, seed=1)
    assert compare(root, [["a", "b"]], "nDCG@10", permutations=2000, seed=1) == first
    text = to_markdown(first)
    assert text.startswith("# Paired comparison on nDCG@10")
    assert "95% simultaneous intervals across the 1 comparisons below (Bonferroni: 95.00% each)" in text
    row = next(line for line in text.splitlines() if line.startswith("| a | b |"))
    assert "| 8 | 0.2812 | 0.3750 | +0.0938 |" in row  # 4.5/16, 6/16, 1.5/16
    assert row.endswith("| 7/1/0 | candidate better |")
    assert "fewer than 10 sign flips" not in text  # j = max{c : (1 + c) / 2001 <= 0.05} = 99


def test_baseline_better_verdict(tmp_path):
    root = write_reports(tmp_path / "reports")
    row = compare(root, [["b", "a"]], "nDCG@10").to_json()["pairs"]["b vs a"]
    assert row["ci_high"] < 0 and row["verdict"] == "baseline better"


def test_family_adjustment_can_remove_a_lone_verdict():
    # 20 queries, 7 gain 0.1 and 1 loses 0.1: sign flips of the eight movers reach |sum| >= 0.6 when
    # at most one sign differs from the rest: exact p = 2 * (1 + 8) / 256 = 0.070. Alone at 80%
    # (alpha 0.2) that is a difference; among ten comparisons (0.02 each) it is not.
    base = {f"q{i}": 0.5 for i in range(20)}
    cand = {q: 0.5 + (0.1 if i < 7 else -0.1 if i < 8 else 0.0) for i, q in enumerate(base)}
    (alone,) = compare_family([(base, cand)], family_level=0.8, permutations=5000, seed=0)
    # ten distinct comparisons: the same movers, and a last query moved by k micro-units in the k-th
    others = [(base, {**cand, "q19": 0.5 + 1e-6 * k}) for k in range(1, 10)]
    tenfold = compare_family([(base, cand), *others], family_level=0.8, permutations=5000, seed=0)
    assert alone["verdict"] == "candidate better" and alone["p_adjusted"] <= 0.2
    assert all(r["verdict"] == "no significant difference" and r["p_adjusted"] > 0.2 for r in tenfold)
    # ten copies of one comparison are one test (issue 51): the family stays one, the verdict stays
    copies = compare_family([(base, cand)] * 10, family_level=0.8, permutations=5000, seed=0)
    assert all(r == alone for r in copies) and family_of(copies, 0.8, 5000, 0).size == 1


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
    params.write_text("evaluate:\n  permutations: 500\n  seed: 3\ncompare:\n  pairs: [[a, b], [a, c]]\n"
                      "  measure: nDCG@10\n")
    argv = ["--reports-root", str(root), "--output", str(tmp_path / "m" / "compare.json"),
            "--markdown", str(root / "compare.md"), "--params", str(params)]
    assert run_command("compare", argv) == 0
    saved = json.loads((tmp_path / "m" / "compare.json").read_text())
    assert saved["permutations"] == 500 and saved["seed"] == 3 and saved["family_size"] == 2
    assert saved["pairs"]["a vs b"]["verdict"] == "candidate better"
    assert (root / "compare.md").read_text() == capsys.readouterr().out
    # --runs: the runs DVC tracks for the stage; a pair naming another run is refused, nothing written
    out = tmp_path / "m2" / "compare.json"
    argv_runs = ["--reports-root", str(root), "--runs", "a", "b", "--output", str(out),
                 "--markdown", str(tmp_path / "m2" / "compare.md"), "--params", str(params)]
    assert run_command("compare", argv_runs) == 2
    assert "run 'c' is not among the runs this stage reads (a, b)" in capsys.readouterr().err
    assert not out.exists()
    assert run_command("compare", argv_runs[:4] + ["c"] + argv_runs[4:]) == 0 and out.is_file()




def test_property_every_verdict_agrees_with_its_adjusted_p():
    rng = np.random.default_rng(16)
    for case in range(150):
        n, m = int(rng.integers(2, 60)), int(rng.integers(1, 8))
        items = []
        for _ in range(m):
            base = rng.random(n)
            cand = np.clip(base + rng.normal(rng.normal(0, 0.05), 0.2, n) * (rng.random(n) < 0.4), 0, 1)
            items.append(({f"q{i}": v for i, v in enumerate(base)}, {f"q{i}": v for i, v in enumerate(cand)}))
        level = float(rng.choice([0.9, 0.95, 0.99]))
        for row in compare_family(items, level, permutations=int(rng.integers(100, 1500)), seed=case):
            significant = row["verdict"] != "no significant difference"
            assert (row["p_adjusted"] <= 1 - level) == significant, (case, row)
            assert significant == (row["ci_low"] > 0 or row["ci_high"] < 0)


def test_strata_join_the_family_when_both_hold_queries(tmp_path):
    root = write_reports(tmp_path / "reports")
    for name in ("a", "b", "c"):  # q0..q2 seen (a relevant document is a training positive), q3..q7 unseen
        path = root / name / "per_query.json"
        data = json.loads(path.read_text())
        for qid, entry in data["queries"].items():
            entry["seen"] = int(qid[1:]) < 3
        path.write_text(json.dumps(data))
    typed = compare(root, [["a", "b"], ["a", "c"]], "nDCG@10", permutations=2000, seed=5)
    result = typed.to_json()
    ab = result["pairs"]["a vs b"]
    # 2 pairs x (all, seen, unseen): one family of 6, each interval at 1 - 0.05 / 6
    assert result["family_size"] == 6 and result["level"] == pytest.approx(1 - 0.05 / 6)
    # D_AB seen q0..q2: 2, 1, 3 -> mean 6/3/16 = 0.125; unseen q3..q7: 1, 2, 2, 1, 0 -> 6/5/16 = 0.075
    assert ab["strata"]["seen"]["queries"] == 3 and ab["strata"]["unseen"]["queries"] == 5
    assert ab["strata"]["seen"]["mean_difference"] == pytest.approx(6 / 3 / 16)
    assert ab["strata"]["unseen"]["mean_difference"] == pytest.approx(6 / 5 / 16)
    assert ab["mean_difference"] == pytest.approx(12 / 8 / 16)
    # the stratum row is the same paired test as the pair restricted to those queries, in the family of 6
    (alone,) = [r for r in compare_family([({f"q{i}": A[i] / 16 for i in range(3, 8)},
                                            {f"q{i}": (A[i] + D_AB[i]) / 16 for i in range(3, 8)})] * 6,
                                          0.95, 2000, 5)[:1]]
    assert (ab["strata"]["unseen"]["ci_low"], ab["strata"]["unseen"]["ci_high"]) == (alone["ci_low"],
                                                                                      alone["ci_high"])
    text = to_markdown(typed)
    assert "| a | b | 3 seen | " in text and "| a | b | 5 unseen | " in text and "*unseen* otherwise" in text


def test_strata_with_one_empty_side_add_nothing(tmp_path):
    root = write_reports(tmp_path / "reports")
    for name in ("a", "b"):  # every query unseen (the support corpus: whole families held out)
        path = root / name / "per_query.json"
        data = json.loads(path.read_text())
        for entry in data["queries"].values():
            entry["seen"] = False
        path.write_text(json.dumps(data))
    result = compare(root, [["a", "b"]], "nDCG@10", permutations=2000, seed=5)
    assert result.family.size == 1 and "strata" not in result.to_json()["pairs"]["a vs b"]
    assert "*unseen*" not in to_markdown(result)


# ----------------------------------------------------------------------------- one row, one format


def _strata_reports(tmp_path):
    root = write_reports(tmp_path / "reports")
    for name in ("a", "b", "c"):  # q0..q2 seen, q3..q7 unseen
        path = root / name / "per_query.json"
        data = json.loads(path.read_text())
        for qid, entry in data["queries"].items():
            entry["seen"] = int(qid[1:]) < 3
        path.write_text(json.dumps(data))
    return root


NEW_MDE_WORDS = ("the verdict follows from the interval alone, so a difference inside the MDE can still be "
                 "significant, and a true difference below it is often missed: no significant difference there "
                 "does not show there is none.")


def test_compare_writes_the_bytes_it_wrote_before_the_typed_rows(tmp_path, capsys):
    # sha256 of what the compare command wrote for these inputs before its rows became dataclasses (commit
    # 1978527), but for one deliberate change since: every interval here is unbounded (8 queries cannot reach
    # p <= 0.05 / 9), so each MDE is now inf instead of the normal approximation's (0.0739, ...), and the note
    # says so; every other byte is the same. Every value is a sum of sixteenths, exact in binary: no CPU's
    # summation order moves a bit.
    root = _strata_reports(tmp_path)
    params = tmp_path / "params.yaml"
    params.write_text("evaluate:\n  permutations: 500\n  seed: 3\ncompare:\n  pairs: [[a, b], [a, c], [b, c]]\n"
                      "  measure: nDCG@10\n")
    out = tmp_path / "m"
    assert run_command("compare", ["--reports-root", str(root), "--output", str(out / "compare.json"),
                                   "--markdown", str(out / "compare.md"), "--params", str(params)]) == 0
    # and one more (issue 43): the MDE sentence no longer calls a difference inside the MDE noise, which
    # contradicted a verdict that is significant inside it; with the old sentence put back, the old bytes
    md = (out / "compare.md").read_text(encoding="utf-8")
    assert md.count(NEW_MDE_WORDS) == 1
    before = md.replace(NEW_MDE_WORDS, "a difference well inside it is noise.").encode("utf-8")
    digest = {"compare.json": hashlib.sha256((out / "compare.json").read_bytes()).hexdigest(),
              "compare.md": hashlib.sha256(before).hexdigest()}
    assert digest == {"compare.json": "0465455e2a0dce7dc37f39adb58da3f8f951c87b20af054495f589bbebf367a6",
                      "compare.md": "3c9ec402b2e6aee7121412a051b4b67a046821e91a48f7e7a9806e1c97cf2fb6"}
    # compare.json read back is the same result: the README and bench_report render the file
    saved = json.loads((out / "compare.json").read_text())
    again = Comparisons.from_json(saved)
    assert again.to_json() == saved and to_markdown(again) == (out / "compare.md").read_text()


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_every_table_shows_a_row_as_row_cells_formats_it(tmp_path):
    # one row (a vs b: 7 wins, 1 tie) in every table that shows comparisons: each must show exactly the
    # cells of row_cells, so a second formatting of the same number anywhere fails here
    from retrieval_lab.reporting.render import comparisons_table, retriever_table, strata_table, verdict_line

    result = compare(_strata_reports(tmp_path), [["a", "b"]], "nDCG@10", permutations=500, seed=3)
    row = result.rows[0].row
    ours = row_cells(row)
    assert ours.difference == "+0.0938" and ours.win_tie_loss == "7/1/0"  # 1.5/16 = 0.09375
    assert ours.verdict == "candidate better"  # one wording, in base/head tables too (head is the candidate)
    line = next(x for x in to_markdown(result).splitlines() if x.startswith("| a | b | 8 |"))
    assert _cells(line) == ["a", "b", *ours]
    from retrieval_lab.metrics import Coverage

    covered = Coverage(False, 8, 0, (), 0, (), 0, {}, {})
    text = runs_to_text(RunsComparison(result.family, {"nDCG@10": row}, {"base": covered, "head": covered}),
                        "a", "b")
    assert re.split(r"\s{2,}", next(x for x in text.splitlines() if x.startswith("nDCG@10"))) == ["nDCG@10", *ours]
    line = next(x for x in comparisons_table([("ft", "nDCG@10", row)]) if x.startswith("| ft |"))
    assert _cells(line) == ["ft", "nDCG@10", *ours]
    line = next(x for x in strata_table([("ft", "seen", row)], result.family, "nDCG@10") if x.startswith("| ft |"))
    assert _cells(line) == ["ft", f"{ours.queries} seen", f"{ours.baseline_mean} → {ours.candidate_mean}",
                            ours.difference, ours.interval, ours.verdict]
    changed = Retriever("ft", ("b", "h"), {}, {"q": {}}, {"nDCG@10": row})
    line = next(x for x in retriever_table([changed], ["nDCG@10"], result.family) if x.startswith("| ft |"))
    assert _cells(line)[2] == (f"{ours.baseline_mean} → {ours.candidate_mean}<br>**{ours.difference}** "
                               f"{ours.interval}<br>MDE {ours.mde}")  # bold: the interval excludes 0
    assert f"ft nDCG@10 {ours.difference} {ours.interval}." in verdict_line(1, 1, [], [], [("ft", "nDCG@10", row)],
                                                                              0.0)
