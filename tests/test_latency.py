"""Latency shown when asked (latency.py): the files ``retrieve --timing`` writes, read back by ``retrieval-lab
latency`` and ``compare --timing-root``; never read otherwise. Percentiles worked by hand (linear
interpolation between closest ranks): 1, 2, 3, 4 ms give p50 2.5, p95 3 + 0.85 = 3.85, p99 3.97."""

from __future__ import annotations

import json

from command_runner import run_command

from retrieval_lab.latency import LatencyRow, Timing, latency_text, read_summary

MACHINE = {"platform": "Linux", "cpu": "cpu-A", "cpu_id": "GenuineIntel family 6 model 143 stepping 8",
           "cpu_isa": ["avx2", "amx_bf16"], "cpu_count": 2, "python": "3.11.7"}
WHEN = "2026-01-01T00:00:00Z"


def _timing(folder, run, ms, wall_s, machine=MACHINE, calls=None):
    folder.mkdir(parents=True, exist_ok=True)
    timing = Timing(run, "search of one query", 1, {f"q{i}": v / 1000 for i, v in enumerate(ms)}, wall_s,
                    machine, WHEN, calls)
    (folder / f"{run}.json").write_text(json.dumps(timing.to_json()), encoding="utf-8")


def test_latency_shows_each_run_and_base_to_head(tmp_path, capsys):
    head, base = tmp_path / "latency" / "toy", tmp_path / "kept-from-main"
    _timing(head, "bm25", [1, 2, 3, 4], 0.02)  # 4 queries in 0.02 s: 200 per second
    _timing(head, "mine", [1, 2, 3, 4], 0.02, calls={"queries": 5, "answered": 4, "failed": 1})
    _timing(base, "bm25", [2, 4, 6, 8], 0.04)
    _timing(base, "mine", [1, 2, 3, 4], 0.02, machine={**MACHINE, "cpu": "cpu-B"})
    assert run_command("latency", [str(head)]) == 0
    out = capsys.readouterr().out
    assert (f"| bm25 | 4 | 1 | 2.50 | 3.85 | 3.97 | 200.0 | – | search of one query | "
            f"cpu-A (GenuineIntel family 6 model 143 stepping 8; avx2 amx_bf16), 2 CPUs | {WHEN} |") in out
    assert "| mine | 4 | 1 | 2.50 | 3.85 | 3.97 | 200.0 | 1 of 5 |" in out  # your retriever's failed calls
    assert "base → head" not in out
    assert run_command("latency", [str(head), "bm25", "--base", str(base)]) == 0
    out = capsys.readouterr().out
    assert "| mine |" not in out  # only the runs named
    # head - base for each number; 2, 4, 6, 8 ms give p50 5.0, p95 7.7, p99 7.94, 100 per second
    assert (f"| bm25 @ {base} | bm25 @ {head} | 5.00 → 2.50 (-2.50) | 7.70 → 3.85 (-3.85) | 7.94 → 3.97 (-3.97) "
            "| 100.0 → 200.0 (+100.0) | 1 → 1 | yes |") in out
    assert run_command("latency", [str(head), "--base", str(base)]) == 0
    assert f"| mine @ {base} | mine @ {head} | 2.50 → 2.50 (+0.00) |" in (out := capsys.readouterr().out)
    assert out.rstrip().endswith("| **no** |")  # two machines: said, not hidden


def test_a_masked_cpu_name_is_told_apart_by_its_make_and_unknown_without_it(tmp_path, capsys):
    # "AMD EPYC" names a Zen 3 without AVX-512 and a Zen 4 with AVX512-BF16 alike (cloud machines mask the model)
    zen3 = {**MACHINE, "cpu": "AMD EPYC", "cpu_id": "AuthenticAMD family 25 model 1 stepping 1", "cpu_isa": ["avx2"]}
    zen4 = {**zen3, "cpu_id": "AuthenticAMD family 25 model 17 stepping 1", "cpu_isa": ["avx2", "avx512_bf16"]}
    before = {k: v for k, v in zen3.items() if k not in ("cpu_id", "cpu_isa")}  # a timing made before they were kept
    cases = {"zen4": (zen4, "| **no** |", False), "same": (zen3, "| yes |", True),
             "unrecorded": (before, "| unknown |", None)}
    for name, (machine, cell, same) in cases.items():
        base, head = tmp_path / name / "base", tmp_path / name / "head"
        _timing(base, "bm25", [1, 2], 0.01, machine=zen3 if name != "unrecorded" else before)
        _timing(head, "bm25", [1, 2], 0.01, machine=machine)
        assert run_command("latency", [str(head), "--base", str(base)]) == 0
        assert capsys.readouterr().out.rstrip().endswith(cell), name
        rows = [LatencyRow("a", "b", read_summary(base / "bm25.json"), read_summary(head / "bm25.json"))]
        assert rows[0].to_json()["same_machine"] is same, name
    assert "AMD EPYC, 2 CPUs" in latency_text(tmp_path / "unrecorded" / "head")  # the name alone, said as recorded


def test_latency_refuses_what_it_cannot_show(tmp_path, capsys):
    head, other = tmp_path / "head", tmp_path / "other"
    _timing(head, "bm25", [1, 2], 0.01)
    _timing(other, "lsa", [1, 2], 0.01)
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.json").write_text('{"summary": {"queries": 1}}', encoding="utf-8")
    cases = [([str(tmp_path / "none")], "no such folder"),
             ([str(tmp_path / "empty")], "holds no <run>.json"),
             ([str(head), "dense"], "no timing for dense (expected dense.json)"),
             ([str(head), "--base", str(other)], "nothing to compare"),
             ([str(tmp_path / "bad")], "not a retrieve --timing file")]
    for argv, message in cases:
        assert run_command("latency", argv) == 2, argv
        printed = capsys.readouterr()
        assert message in printed.err and printed.out == "" and len(printed.err.strip().splitlines()) == 1, argv


def _reports(root, runs=("a", "b", "c")):
    for i, name in enumerate(runs):
        queries = {f"q{j}": {"measures": {"nDCG@10": (j + i) % 4 / 4}, "first_positive_rank": 1,
                             "positive_ranks": {}} for j in range(8)}
        (root / name).mkdir(parents=True)
        (root / name / "per_query.json").write_text(json.dumps({"queries": queries}), encoding="utf-8")
        _timing(root / name, "timing", [1, 2], 0.01)  # where retrieve wrote it before: never read now
    return root


def test_compare_reads_latency_only_from_a_timing_root(tmp_path, capsys):
    root = _reports(tmp_path / "reports")
    params = tmp_path / "params.yaml"
    params.write_text("evaluate:\n  permutations: 200\ncompare:\n  pairs: [[a, b], [a, c]]\n  measure: nDCG@10\n")

    def compare(out, *extra):
        argv = ["--reports-root", str(root), "--output", str(out / "compare.json"), "--markdown",
                str(out / "compare.md"), "--params", str(params), *extra]
        code = run_command("compare", argv)
        capsys.readouterr()
        return code

    assert compare(tmp_path / "plain") == 0  # a timing.json beside per_query.json is not read
    assert "latency" not in json.loads((tmp_path / "plain" / "compare.json").read_text())
    assert "Latency" not in (tmp_path / "plain" / "compare.md").read_text()
    timings = tmp_path / "latency"
    _timing(timings, "a", [1, 2, 3, 4], 0.02)
    _timing(timings, "b", [2, 4, 6, 8], 0.04)
    assert compare(tmp_path / "timed", "--timing-root", str(timings)) == 0
    saved = json.loads((tmp_path / "timed" / "compare.json").read_text())
    assert list(saved["latency"]) == ["a vs b"]  # c has no timing: no row for a vs c
    assert saved["latency"]["a vs b"]["difference"]["p50_ms"] == 2.5
    assert {k: v for k, v in saved.items() if k != "latency"} == \
        json.loads((tmp_path / "plain" / "compare.json").read_text())  # the judged part is unchanged
    md = (tmp_path / "timed" / "compare.md").read_text()
    assert "| a | b | 2.50 → 5.00 (+2.50) |" in md and "Not timed (no timing file): c." in md
    assert compare(tmp_path / "wrong", "--timing-root", str(tmp_path / "empty-folder")) == 2
    (tmp_path / "empty-folder").mkdir()
    assert compare(tmp_path / "wrong", "--timing-root", str(tmp_path / "empty-folder")) == 2
    assert not (tmp_path / "wrong").exists()
