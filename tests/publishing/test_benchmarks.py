"""retrieval_lab.publishing.benchmarks (scripts/bench_report.py): docs/benchmarks.md assembled from fabricated JSONs; no benchmark is run."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from beir_fixtures import REPO

from retrieval_lab.publishing import benchmarks

MACHINE = {"cpu": "Test CPU 3000", "cores": 8, "usable_cores": 4, "ram_gib": 31.2, "gpu": "none", "os": "Linux",
           "python": "3.11.7", "torch": "2.13.0", "numpy": "2.1.0", "peers": {"bm25s": "0.3.16"},
           "OMP_NUM_THREADS": "2"}


@pytest.fixture(scope="module")
def report():
    return benchmarks


def _write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


@pytest.fixture
def inputs(tmp_path):
    results = tmp_path / "results"
    _write(results / "metrics.json", {
        "rows": [{"contender": "ours", "seconds": 6.0, "peak_mb": 300.0, "means": {"nDCG@10": 0.5, "RR": 0.6}},
                 {"contender": "pytrec_eval", "seconds": 8.0, "peak_mb": 1200.0, "means": {"nDCG@10": 0.5, "RR": 0.6}}],
        "ratio": 0.75, "goal": 1.0, "queries": 10000, "depth": 1000, "seed": 0,
        "max_abs_diff_means": 0.0, "max_abs_diff_per_query": 1e-16})
    _write(results / "bm25.json", {"rows": [
        {"contender": "ours", "seconds": 2.1, "peak_mb": 500.0, "base_mb": 380.0, "nDCG@10": 0.672, "rounds": [2.3, 2.1]},
        {"contender": "bm25s", "seconds": 1.2, "peak_mb": 450.0, "base_mb": 380.0, "nDCG@10": 0.671, "rounds": [1.2, 1.3]},
        {"contender": "tantivy_en_stem", "seconds": 3.0, "cpu_seconds": 2.95, "peak_mb": 450.0, "base_mb": 350.0,
         "nDCG@10": 0.6843, "rounds": [3.0, 3.1]},
        {"contender": "tantivy_stop", "seconds": 2.0, "peak_mb": 520.0, "base_mb": 350.0, "nDCG@10": 0.6858,
         "rounds": [2.0, 2.2]},
        {"contender": "rank_bm25", "seconds": 42.0, "peak_mb": 900.0, "base_mb": 380.0, "nDCG@10": 0.672,
         "rounds": [42.0, 44.0]}], "ours_over_bm25s": 1.75, "goal": 1.5,
        "tantivy_goals": {"seconds": 1.0, "peak_mb": 1.0},
        "tantivy": {"tantivy_en_stem": {"ratios": {"seconds": 0.7, "peak_mb": 500 / 450, "added_mb": 1.2},
                                        "met": {"seconds": True, "peak_mb": False, "added_mb": False}},
                    "tantivy_stop": {"ratios": {"seconds": 1.05, "peak_mb": 500 / 520, "added_mb": 120 / 170},
                                     "met": {"seconds": False, "peak_mb": True, "added_mb": True}}},
        "tantivy_field_norms": {"documents": 5183, "documents_whose_length_changes": 4647, "exact_up_to": 40,
                                "max_relative_length_error": 0.1, "nDCG@10_exact": 0.6857, "nDCG@10_quantised": 0.6838,
                                "queries": 300, "queries_whose_top10_changes": 183},
        "load_average": {"start": [5.5, 4.0, 3.0], "end": [6.25, 4.0, 3.0]}, "cores": 2, "cpu": 0})
    _write(results / "encode.json", {"rows": [
        {"contender": "ours", "seconds": 6.67, "docs_per_s": 150.0, "peak_mb": 900.0, "base_mb": 700.0, "rounds": [6.67]},
        {"contender": "sentence-transformers", "seconds": 8.33, "docs_per_s": 120.0, "peak_mb": 950.0, "base_mb": 700.0,
         "rounds": [8.33]}], "ours_over_st": 1.25, "max_abs_diff": 2e-7, "goal": 1.0, "limit": 1000,
        "batch_size": 64, "device": "cpu"})
    # train: no JSON and no manifest entry -> "not run"
    entry = {"quick": False, "returncode": 0, "finished": "2026-11-29 10:00 UTC", "machine": MACHINE}
    manifest = {"metrics": {**entry, "args": ["--json", "bench-results/metrics.json"]},
                "bm25": {**entry, "args": ["--rounds", "3", "--json", "bench-results/bm25.json"]},
                "encode": {**entry, "quick": True, "args": ["--limit", "128", "--json", "bench-results/encode.json"]}}
    _write(results / "manifest.json", manifest)
    metrics = tmp_path / "metrics"
    _write(metrics / "bm25.json", {"nDCG@10": 0.672, "AP@10": 0.61, "R@100": 0.9, "queries_evaluated": 300})
    _write(metrics / "dense-ft-hard.json", {"nDCG@10": 0.7512, "queries_evaluated": 300})
    _write(metrics / "fused-rrf.json", {"nDCG@10": 0.74, "queries_evaluated": 300})
    _write(metrics / "compare.json", {
        "measure": "nDCG@10", "adjustment": "bonferroni", "family_size": 1, "family_level": 0.95, "level": 0.95,
        "permutations": 10000, "seed": 5, "power": 0.8,
        "pairs": {"dense vs dense-ft-hard": {
            "baseline": "dense", "candidate": "dense-ft-hard", "queries": 300, "queries_only_in_one": 0,
            "baseline_mean": 0.645, "candidate_mean": 0.7512, "mean_difference": 0.1062, "ci_low": 0.08,
            "ci_high": 0.13, "p_value": 0.0001, "p_adjusted": 0.0001, "mde": 0.03, "wins": 120, "ties": 150,
            "losses": 30, "verdict": "candidate better", "level": 0.95, "tail": 499}}})
    timings = _write(tmp_path / "repro.json", {"command": ["dvc", "repro"], "total_seconds": 100.0, "returncode": 0,
                                               "stages": {"prepare": 5.0, "encode": 25.0, "train@hard": 60.0}})
    return results, metrics, timings


def _rows(md: str, *first: str) -> list[list[str]]:
    """The cells of every table row whose leading cells are ``first``."""
    found = []
    for line in md.splitlines():
        if line.startswith("| "):
            cells = [c.strip() for c in line.strip()[1:-1].split("|")]
            if cells[:len(first)] == list(first):
                found.append(cells)
    return found


def _build(report, inputs) -> str:
    results, metrics, timings = inputs
    loaded = {n: json.loads(p.read_text()) if (p := results / f"{n}.json").exists() else None
              for n in ("metrics", "bm25", "encode", "train")}
    manifest = json.loads((results / "manifest.json").read_text())
    return report.build_report(loaded, manifest, "bench-results", metrics, [timings], MACHINE, "2026-11-29 12:00 UTC")


def test_speed_rows_ratio_goal_memory_and_command(report, inputs):
    md = _build(report, inputs)
    cmd = "`OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_metrics.py --json bench-results/metrics.json`"
    # 6.0 s / 8.0 s = 0.750 <= 1.0: met; memory as recorded
    assert _rows(md, "metrics: 2 measures, 10,000 queries x 1,000 docs") == [[
        "metrics: 2 measures, 10,000 queries x 1,000 docs", "6.00 s", "pytrec_eval", "8.00 s", "0.750x", "<= 1x",
        "yes", "300 / 1,200", "A", cmd]]
    bm25 = {row[2]: row for row in _rows(md, "BM25 on SciFact: index 5,183 docs, 300 test queries (depth 100), "
                                             "write the run")}
    # 2.1 / 1.2 = 1.750 > 1.5: not met; memory = peak - base: 500 - 380 = 120, 450 - 380 = 70
    assert bm25["bm25s"][1:8] == ["2.10 s", "bm25s", "1.20 s", "1.750x", "<= 1.5x", "**no**", "120 / 70"]
    # 2.1 / 42 = 0.050, no goal against rank_bm25; 900 - 380 = 520
    assert bm25["rank_bm25"][1:8] == ["2.10 s", "rank_bm25", "42.0 s", "0.050x", "-", "", "120 / 520"]
    # 2.1 / 3.0 = 0.700 <= 1: met; 2.1 / 2.0 = 1.050: not met; growth 450 - 350 = 100, 520 - 350 = 170
    assert bm25["tantivy (en_stem)"][1:8] == ["2.10 s", "tantivy (en_stem)", "3.00 s", "0.700x", "<= 1x", "yes",
                                              "120 / 100"]
    assert bm25["tantivy (our stop list)"][1:8] == ["2.10 s", "tantivy (our stop list)", "2.00 s", "1.050x", "<= 1x",
                                                    "**no**", "120 / 170"]
    notes = md.split("- BM25 vs bm25s, tantivy and rank_bm25:")[1].splitlines()[0]
    assert ("ours / tantivy (en_stem): time 0.70x (goal <= 1x: met), peak memory 1.11x (goal <= 1x: **not met**), "
            "memory growth 1.20x (**not met**)") in notes
    assert "nDCG@10 0.6838 against 0.6857 (-0.0019), the top 10 reordered or changed on 183 of 300 queries" in notes
    assert "exact up to 40 tokens and coarser beyond (up to 10% short), so 4,647 of the 5,183" in notes
    assert "load average (1 min) 5.5 at the start, 6.2 at the end, on 2 cores" in notes
    assert "bound to one CPU (CPU 0)" in notes and "(every thread): tantivy_en_stem 2.950" in notes
    assert bm25["bm25s"][9] == "`OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_bm25.py --rounds 3 " \
                               "--json bench-results/bm25.json`"
    # docs/s: 150 / 120 = 1.250 >= 1.0: met; 900 - 700 = 200, 950 - 700 = 250
    (encode,) = _rows(md, "encode 1,000 SciFact docs (all-MiniLM-L6-v2, batch 64, device cpu)")
    assert encode[1:9] == ["150 docs/s", "sentence-transformers", "120 docs/s", "1.250x", ">= 1x", "yes",
                           "200 / 250", "A"]
    # no result, no record: "not run", the reference command, no machine
    assert _rows(md, "training step vs sentence-transformers") == [[
        "training step vs sentence-transformers", "not run", "", "", "", "", "", "", "",
        "`.venv/bin/python scripts/bench_train.py --json bench-results/train.json`"]]
    assert "**quick settings**" in md.split("- encoding vs sentence-transformers:")[1].splitlines()[0]
    assert "- **A**: Test CPU 3000, 8 cores (4 usable), RAM 31.2 GiB" in md
    assert "Results of 2026-11-29." in md


def test_failed_benchmark_says_so(report, inputs):
    metrics = inputs[1]
    manifest = {"train": {"args": [], "quick": False, "returncode": 2, "finished": "2026-11-29 10:00 UTC",
                          "machine": MACHINE}}
    md = report.build_report({"train": None}, manifest, "r", metrics, [], MACHINE, "now")
    row = _rows(md, "training step vs sentence-transformers")[0]
    assert row[1] == "failed (exit 2)" and row[8] == "A"


def test_quality_tables_against_published_figures(report, inputs):
    md = _build(report, inputs)
    assert _rows(md, "bm25", "BM25 (our tokenizer, our sparse index, Lucene scoring)")[0][2:] == \
        ["0.6720", "0.6100", "-", "0.9000", "-", "-", "-", "300"]  # R@10, RR@10 and the strata absent
    assert _rows(md, "lsa")[0][2] == "not run"
    # 0.672 - 0.665 = +0.0070 and 0.672 - 0.679 = -0.0070: both within 0.015
    assert [r[2:] for r in _rows(md, "bm25", "nDCG@10")] == [
        ["0.6720", "BEIR (Thakur et al., 2021), BM25", "0.665", "+0.0070", "within ±0.015", "yes"],
        ["0.6720", "Anserini BM25 flat (Pyserini BEIR regressions)", "0.679", "-0.0070", "within ±0.015", "yes"]]
    assert [_rows(md, "dense", m)[0][2] for m in ("nDCG@10", "AP@10", "R@100")] == ["not run"] * 3
    assert _rows(md, "dense-ft-hard", "nDCG@10")[0][2:] == ["0.7512", "project goal, fine-tuned", "-", "-",
                                                            ">= 0.74", "yes"]
    assert _rows(md, "fused-rrf", "nDCG@10")[0][2:] == ["0.7400", "project goal, fusion", "-", "-", ">= 0.76",
                                                        "**no**"]
    assert _rows(md, "fused-weighted", "nDCG@10")[0][2] == "not run"
    (pair,) = _rows(md, "dense", "dense-ft-hard", "300")
    assert pair[5:7] == ["+0.1062", "[+0.0800, +0.1300]"]


def test_time_shares_sorted_with_dvc_overhead(report, inputs):
    md = _build(report, inputs)
    section = md.split("## Where the time of a full `dvc repro` goes")[1]
    assert "`dvc repro` (repro.json): 100 s in all" in section
    # 100 s in all, stages sum to 90: 10 s outside stages
    assert [r for r in _rows(section) if r[0] not in ("stage", "---")] == [
        ["train@hard", "60.0", "60.0%"], ["encode", "25.0", "25.0%"],
        ["(outside stages: DVC start-up, hashing, lock)", "10.0", "10.0%"], ["prepare", "5.00", "5.0%"]]


def test_skip_run_writes_the_page_without_running(report, inputs, tmp_path, monkeypatch):
    results, metrics, timings = inputs

    def no_run(*args, **kwargs):
        raise AssertionError("--skip-run ran something")

    monkeypatch.setattr(report, "run_benchmarks", no_run)
    monkeypatch.setattr(report.subprocess, "run", no_run)
    monkeypatch.setattr(report, "machine_info", lambda: MACHINE)
    out = tmp_path / "docs" / "benchmarks.md"
    assert report.main(["--skip-run", "--results-dir", str(results), "--scifact-metrics", str(metrics),
                        "--timings", str(timings), "--output", str(out)]) == 0
    md = out.read_text(encoding="utf-8")
    assert md.startswith("# Benchmarks\n") and "| 0.750x |" in md and "| 1.750x |" in md
    assert f"This page: `.venv/bin/python scripts/bench_report.py --skip-run --results-dir {results} " in md
    assert [p.name for p in out.parent.iterdir()] == ["benchmarks.md"]  # atomic: no temporary left


def test_goal_boundaries(report):
    assert report.Goal("<=", 1.5).met(1.5) and not report.Goal("<=", 1.5).met(1.5001)
    assert report.Goal(">=", 1.0).met(1.0) and not report.Goal(">=", 1.0).met(0.999)


def test_several_labelled_metrics_folders(report, inputs, tmp_path):
    metrics = inputs[1]
    fast = tmp_path / "fast"
    _write(fast / "dense-ft-hard.json", {"nDCG@10": 0.68, "queries_evaluated": 300})
    md = report.build_report({}, {}, "r", [("quality", metrics), ("fast", fast)], [], MACHINE, "now")
    assert "## SciFact quality (test split): quality" in md and "## SciFact quality (test split): fast" in md
    fast_part = md.split("## SciFact quality (test split): fast")[1]
    assert _rows(fast_part, "dense-ft-hard", "nDCG@10")[0][2:] == ["0.6800", "project goal, fine-tuned", "-", "-",
                                                                   ">= 0.74", "**no**"]
    assert _rows(fast_part, "bm25", "nDCG@10")[0][2] == "not run"  # each folder on its own


def test_strata_and_the_spread_over_seeds(report, tmp_path):
    seed42, seed43 = tmp_path / "s42", tmp_path / "s43"
    for folder, (all_, seen, unseen) in ((seed42, (0.70, 0.80, 0.60)), (seed43, (0.72, 0.83, 0.58))):
        _write(folder / "dense-ft-hard.json", {"nDCG@10": all_, "queries_evaluated": 5,
                                               "seen": {"queries": 3, "nDCG@10": seen},
                                               "unseen": {"queries": 2, "nDCG@10": unseen}})
    md = report.build_report({}, {}, "r", [("default", [seed42, seed43])], [], MACHINE, "now")
    # the first folder is the one shown, each stratum with its query count
    row = _rows(md, "dense-ft-hard", "fine-tuned, mined hard negatives")[0]
    assert row[2] == "0.7000" and row[7:] == ["0.8000 (3)", "0.6000 (2)", "5"]
    assert "### Spread over 2 training seeds" in md
    # mean ± sample sd: all (0.70 + 0.72) / 2 = 0.71, sd = sqrt(2 * 0.01^2 / 1) = 0.0141;
    # seen 0.815 ± sqrt(2 * 0.015^2) = 0.0212; unseen 0.59 ± 0.0141
    assert _rows(md.split("### Spread over")[1], "dense-ft-hard") == [
        ["dense-ft-hard", "0.7100 ± 0.0141 (5)", "0.8150 ± 0.0212 (3)", "0.5900 ± 0.0141 (2)"]]
    # one folder: no spread
    assert "Spread over" not in report.build_report({}, {}, "r", [("one", [seed42])], [], MACHINE, "now")


def test_a_labelled_list_of_seed_folders_on_the_command_line(report):
    assert report._metrics_argument("fixed corpus (val_unseen=false)=a,b") == \
        ("fixed corpus (val_unseen=false)", [report.Path("a"), report.Path("b")])
    assert report._metrics_argument("metrics/scifact") == (None, [report.Path("metrics/scifact")])
    # a label without a folder: its section says so instead of failing
    label, folders = report._metrics_argument("nothing=")
    assert "no folder given" in report.build_report({}, {}, "r", [(label, folders)], [], MACHINE, "now")


def test_finetune_section(report):
    result = {"pairs": 919, "ndcg10_differences": {"ours - recipe": 0.7410 - 0.7273}, "rows": [
        {"contender": "plain recipe (issue 14)", "steps": 58, "train_seconds": 755.0, "nDCG@10": 0.7273,
         "AP@10": 0.68, "R@100": 0.9367},
        {"contender": "ours", "steps": 52, "train_seconds": 700.0, "nDCG@10": 0.7410, "AP@10": 0.6996,
         "R@100": 0.9533}]}
    md = report.build_report({}, {}, "r", None, [], MACHINE, "now", finetune=result)
    assert _rows(md, "plain recipe (issue 14)")[0][1:] == ["58", "755", "0.7273", "0.6800", "0.9367"]
    assert _rows(md, "ours")[0][1:] == ["52", "700", "0.7410", "0.6996", "0.9533"]
    assert "nDCG@10 ours - recipe: **+0.0137** (919 recipe pairs, one run" in md  # 0.7410 - 0.7273
    assert "Not run." in report.build_report({}, {}, "r", None, [], MACHINE, "now")


def test_scale_section(report):
    def step(seconds, peak, exponents):
        return {"seconds": seconds, "peak_mb": peak, "exponents": exponents}

    # 10 -> 100 -> 1000 docs; bm25_index x10 then x100: k = 1 then 2 (over the 1.1 goal)
    table = {"bm25_index": step([1.0, 10.0, 1000.0], [5, 50, 900], [1.0, 2.0]),
             "metrics": step([0.2, 0.2, 0.2], [9, 9, 9], [0.0, 0.0]),
             "metrics_pytrec_eval": step([1.0, 1.0, 1.0], [9, 9, 9], [0.0, 3.0])}
    result = {"sizes": [10, 100, 1000], "queries": 5, "table": table, "bm25_seconds": 700.0, "bm25_peak_mb": 900,
              "metrics_ratio": [0.2, 0.2, 0.2], "goals": {"bm25_seconds_at_1m": 600.0, "bm25_peak_mb_at_1m": 8192.0,
                                                           "exponent": 1.1, "metrics_ratio": 0.3},
              "faiss": {"documents": 1000, "queries": 5, "dim": 8, "rows": {
                  "Flat": {"search_param": None, "build_seconds": 0.1, "queries_per_second": 50.0,
                           "recall@100_vs_flat": 1.0, "peak_mb": 10.0}}}}
    text = "\n".join(report.scale_section(result, "bench-results"))
    assert "| bm25_index | 1.00 | 10.0 | 1,000 | 900 | 1.00 | 2.00 |" in text
    assert "| largest growth exponent (ours) | 2.00 | <= 1.1 | **no** |" in text  # pytrec_eval's row not counted
    assert "| BM25 index + 5 queries at 1,000 documents | 700 s | <= 600 s | **no** |" in text
    assert "| metrics engine / pytrec_eval, at each size | 0.20x, 0.20x, 0.20x | <= 0.3x | yes |" in text
    assert "| Flat | - | 0.100 | 50.0 | 1.000 | 10.0 |" in text
    assert "scripts/bench_scale.py --sizes 10000 100000 1000000 --json bench-results/scale.json" in text
    assert "Not run" in "\n".join(report.scale_section(None, "bench-results"))


def test_a_published_figure_made_at_another_encoded_length_is_shown_not_judged(report, tmp_path):
    folder = tmp_path / "m"
    _write(folder / "dense.json", {"nDCG@10": 0.6568, "AP@10": 0.604, "queries_evaluated": 300})
    at_512 = report.build_report({}, {}, "r", [("long", folder)], [], MACHINE, "now", dense_tokens=512)
    # MTEB's 0.645 is made at 256 tokens: 0.6568 - 0.645 = +0.0118 is shown, the goal within ±0.005 is not applied
    assert _rows(at_512, "dense", "nDCG@10")[0][2:] == [
        "0.6568", "MTEB, all-MiniLM-L6-v2, at 256 tokens", "0.645", "+0.0118", "not judged: this run encodes 512 tokens",
        ""]
    # the same length, or none stated: judged as before (0.6568 is 0.0118 away, outside ±0.005)
    for tokens in (256, None):
        md = report.build_report({}, {}, "r", [("x", folder)], [], MACHINE, "now", dense_tokens=tokens)
        assert _rows(md, "dense", "nDCG@10")[0][2:] == ["0.6568", "MTEB, all-MiniLM-L6-v2", "0.645", "+0.0118",
                                                        "within ±0.005", "**no**"]


def test_the_committed_page_is_what_the_committed_results_give(report, tmp_path, monkeypatch):
    # docs/benchmarks.md names the command that made it; rerun it on bench-results/ (--skip-run: nothing runs)
    page = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    invocation = shlex.split(re.search(r"^This page: `\.venv/bin/python scripts/bench_report\.py (.*)`\.$", page,
                                       re.MULTILINE).group(1))
    assert "--skip-run" in invocation
    generated = re.search(r"Generated by `scripts/bench_report.py` on (.*?)\. ", page).group(1)
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(report, "_now", lambda: generated)
    # the page describes the machines recorded in bench-results/, never the one rebuilding it: CI's CPU differs
    monkeypatch.setattr(report, "machine_info", lambda: {**MACHINE, "cpu": "a CPU the page must not name"})
    out = tmp_path / "benchmarks.md"
    assert report.main([*invocation, "--output", str(out)]) == 0
    rebuilt = out.read_text(encoding="utf-8").replace(f" --output {out}", "")
    assert rebuilt == page, "docs/benchmarks.md differs from what bench-results/ gives: rerun the command in its head"


def test_finetune_peers_section(report):
    cell = lambda mean, sd: {"mean": mean, "sd": sd, "values": []}
    summary = [{"contender": name, "seeds": [42, 43], "seconds": seconds, "peak_mb": 2048.0,
                "nDCG@10 all": cell(mean, 0.01), "nDCG@10 seen": cell(mean + 0.02, 0.02),
                "nDCG@10 unseen": cell(mean - 0.02, None), "R@100 all": cell(0.95, 0.0)}
               for name, seconds, mean in (("ours-hard", 800.0, 0.7125), ("st-mnrl", 1000.0, 0.7200))]
    comparison = {"ours": "ours-hard", "peer": "st-mnrl", "measure": "nDCG@10", "stratum": "all", "queries": 300,
                  "mean_difference": 0.0075, "ci_low": -0.02, "ci_high": 0.035, "verdict": "no significant difference"}
    peers = {"rows": [{"contender": c, "seed": s, "load_before": [2.0 + s - 42, 0, 0], "load_after": [2.04, 0, 0]}
                      for c in ("ours-hard", "st-mnrl") for s in (42, 43)]
             + [{"contender": "st-mnrl", "seed": 44}], "finished": True,
             "machine": {"cpu": "AMD EPYC", "usable_cores": 2}, "overrides": ["train.bf16=true"],
             "st": {"batch": 8, "lr": 5e-5, "epochs": 3, "tuned_lrs": [1e-5]}, "strata": {"all": 300, "seen": 168,
             "unseen": 132}, "summary": summary, "comparisons": [comparison],
             "family": {"family_size": 1, "family_level": 0.95, "permutations": 100, "seed": 5},
             "goals": [{"ours": "ours-hard", "best_peer": "st-mnrl", "difference": -0.0075, "low": -0.035,
                        "high": 0.02, "time_ratio": 0.8, "quality_met": False, "time_met": True, "met": False}]}
    md = report.build_report({}, {}, "r", None, [], MACHINE, "now", peers=peers)
    assert _rows(md, "ours, `train@hard`")[0][1:] == ["42, 43", "0.7125 ± 0.0100", "0.7325 ± 0.0200", "0.6925",
                                                      "0.9500 ± 0.0000", "800", "2,048", "2.0 → 2.0; 3.0 → 2.0"]
    assert _rows(md, "st-mnrl")[0][1:] == ["ours-hard", "nDCG@10", "all (300)", "+0.0075", "[-0.0200, +0.0350]",
                                           "no significant difference"]
    assert _rows(md, "ours-hard")[-1][1:] == ["st-mnrl", "-0.0075", "[-0.0350, +0.0200]", "0.80x",
                                              "quality no, time yes", "not judged (partial)"]
    assert "missing ours-hard seed 44" in md and "Not run" not in md.split("## Fine-tuning")[1].split("## ")[0]


def _peers(contenders: list[str], seeds: list[int]) -> dict:
    from retrieval_lab.comparison import compare_family, family_of

    ours, peer = {"q1": 0.5, "q2": 0.7, "q3": 0.2}, {"q1": 0.6, "q2": 0.7, "q3": 0.4}
    judged = compare_family([(ours, peer)], 0.95, 200, 5)
    row = judged[0].to_json()
    cell = {"mean": 0.5, "sd": None}
    return {"machine": MACHINE, "overrides": ["train.epochs=3"], "rows": [
        {"contender": c, "seed": s} for s in seeds for c in contenders], "finished": True, "strata": {"all": 3},
        "st": {"batch": 8, "lr": 5e-5, "epochs": 3, "tuned_lrs": [1e-5, 2e-5]},
        "summary": [{"contender": c, "seeds": seeds, "seconds": 100.0, "peak_mb": 900.0, "nDCG@10 all": cell,
                     "R@100 all": cell} for c in contenders],
        "comparisons": [{"ours": "ours-hard", "peer": "st-mnrl", "measure": "nDCG@10", "stratum": "all",
                         "queries": 3, **row}],
        "family": family_of(judged, 0.95, 200, 5).to_json(),
        "goals": [{"ours": "ours-hard", "best_peer": "st-mnrl", "difference": -row["mean_difference"],
                   "low": -row["ci_high"], "high": -row["ci_low"], "time_ratio": 0.5, "quality_met": True,
                   "time_met": True, "met": True}]}


def test_a_partial_peers_bench_never_judges_the_goal():
    # the goal is ours against the best of all five contenders over 3 seeds: two contenders and one seed
    # (what fits in a session) are shown, and the goal is marked not judged even where the pair would meet it
    md = "\n".join(benchmarks.peers_lines(_peers(["ours-hard", "st-mnrl"], [42]), "bench-results"))
    assert ("**Partial**: 2 of the 5 contenders, 1 of 3 seeds; not run: ours-query, st-cmnrl, st-mnrl-tuned. "
            "The goal below is **not judged**") in md
    assert _rows(md, "ours-hard", "st-mnrl")[0][-1] == "not judged (partial)"
    full = "\n".join(benchmarks.peers_lines(_peers(list(benchmarks.PEER_NAMES), [42, 43, 44]), "bench-results"))
    assert "Partial" not in full and _rows(full, "ours-hard", "st-mnrl")[0][-1] == "yes"
    one_seed = "\n".join(benchmarks.peers_lines(_peers(list(benchmarks.PEER_NAMES), [42]), "bench-results"))
    # st-backend, the train stage with sentence-transformers' trainer, is shown but not one of the five
    with_backend = "\n".join(benchmarks.peers_lines(_peers([*benchmarks.PEER_NAMES, "st-backend"], [42, 43, 44]),
                                                    "bench-results"))
    assert "Partial" not in with_backend and "| `train@hard`, `train.backend: sentence-transformers`" in with_backend
    assert "**Partial**: 5 of the 5 contenders, 1 of 3 seeds. The goal" in one_seed


def test_a_time_half_across_sessions_is_shown_not_judged():
    # a merge whose ours and best peer ran in different parts leaves the time half unjudged (time_met None)
    # and the goal not met, though 0.5x would pass: the page says which, never "time no" or "yes"
    peers = _peers(list(benchmarks.PEER_NAMES), [42, 43, 44])
    peers["goals"][0].update(time_same_session=False, time_met=None, met=False)
    md = "\n".join(benchmarks.peers_lines(peers, "bench-results"))
    assert _rows(md, "ours-hard", "st-mnrl")[0][-2:] == [
        "quality yes, time not judged (ours and the peer ran in different sessions)", "**no**"]


def test_the_backend_run_has_its_own_heading_and_command():
    backend = _peers(["st-backend", "ours-hard"], [42])
    md = "\n".join(benchmarks.finetune_section(None, "bench-results", None, backend))
    assert "### `train.backend: sentence-transformers`: the same trainer behind the train stage" in md
    assert ("--seeds 42 --only st-backend ours-hard --json bench-results/finetune-backend.json`" in md
            and "--seeds 42 43 44" not in md)
    assert "**Partial**: 2 of the 5 contenders" in md  # never a judged goal: not the five contenders
    backend["rows"][0].update(load_before=[4.31, 4.4, 3.8], load_after=[2.16, 2.1, 2.4])
    row = next(line for line in "\n".join(benchmarks.peers_lines(backend, "bench-results")).splitlines()
               if line.startswith("| `train@hard`, `train.backend"))
    assert row.endswith("| 4.3 → 2.2 |")  # the load each run met, so a shared machine's time reads as such


def test_a_merged_peers_bench_names_its_parts_and_their_commands():
    merged = _peers(["ours-hard", "st-mnrl"], [42])
    merged["pieces"] = [
        {"file": "a.json", "date": "2026-12-05", "args": ["--seeds", "42", "--json", "/tmp/x.json", "--only", "ours-hard"],
         "wall_seconds": 10.0, "rows": [["ours-hard", 42]]},
        {"file": "b.json", "date": "2026-12-06", "args": ["--seeds", "42", "--only", "st-mnrl", "--json=/tmp/y.json"],
         "wall_seconds": 10.0, "rows": [["st-mnrl", 42]]}]
    md = "\n".join(benchmarks.peers_lines(merged, "bench-results"))
    assert "`scripts/bench_finetune_peers.py`, 2 runs on one machine type (Test CPU 3000, " in md
    assert ("4 usable cores; one type by the CPU's model name only, which cloud machines mask: the parts predate the "
            "record of its make), seeds 42") in md and "one run on one" not in md
    script = "OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_finetune_peers.py"
    assert (f"the grid was run in 2 parts, each timing only its own runs: `{script} --seeds 42 --only ours-hard "
            f"--json a.json` on 2026-12-05 (ours-hard seed 42); `{script} --seeds 42 --only st-mnrl --json b.json` "
            f"on 2026-12-06 (st-mnrl seed 42); then merged") in md
    assert f"`{script} --merge a.json b.json --json bench-results/finetune-peers.json`." in md
    assert "/tmp/" not in md  # each part's command writes the file the merge read, wherever it wrote first
    # st-mnrl-tuned's candidates trained in parts of their own (--reuse), outside the merge: their commands shown
    # too, from the checkout's root; a reused part that is one of the merged pieces is not shown twice
    tuned = {"file": "bench-results/c.json", "date": "2026-12-07", "wall_seconds": 1.0, "rows": [["st-mnrl-tuned", 42]],
             "args": ["--seeds", "42", "--only", "st-mnrl-tuned", "--reuse", "/m/bench-results/b.json",
                      "/m/bench-results/lr1.json", "--json", "/tmp/z.json"],
             "reused": [{"file": "/m/bench-results/lr1.json", "date": "2026-12-06", "lr": 1e-5, "rows": [["st-mnrl", 42]],
                         "args": ["--seeds", "42", "--only", "st-mnrl", "--st-lr", "1e-5", "--json", "/w/out/lr1.json"]},
                        {"file": "b.json", "date": "2026-12-06", "lr": 5e-5, "rows": [["st-mnrl", 42]], "args": []}]}
    md = "\n".join(benchmarks.peers_lines({**merged, "pieces": [*merged["pieces"], tuned]}, "bench-results"))
    assert (f"`{script} --seeds 42 --only st-mnrl-tuned --reuse bench-results/b.json bench-results/lr1.json --json "
            f"bench-results/c.json` on 2026-12-07 (st-mnrl-tuned seed 42); st-mnrl-tuned's candidates at other rates, "
            f"each trained in a part of its own that `--reuse` read: `{script} --seeds 42 --only st-mnrl --st-lr 1e-5 "
            f"--json bench-results/lr1.json` on 2026-12-06 (st-mnrl seed 42 at lr 1e-05); then merged") in md
    assert "/w/" not in md and "/m/" not in md and md.count("--json b.json") == 1
    merged["pieces"][1]["date"] = None  # a part from before parts recorded their date: no "on None"
    md = "\n".join(benchmarks.peers_lines(merged, "bench-results"))
    assert "--json b.json` (st-mnrl seed 42)" in md and "None" not in md
    # how ours was timed: parts from before the bench ran ours with every command's allocator setting say so
    assert "Ours ran on glibc's defaults, as the peers did: made before the bench ran ours" in md
    single = "\n".join(benchmarks.peers_lines({**_peers(["ours-hard", "st-mnrl"], [42]),
                                                "ours_keeps_freed_memory": True}, "bench-results"))
    assert ("Ours runs as the stage runs, with glibc keeping freed memory for reuse (every command's setting, "
            "`core/memory.py`); the peers on glibc's defaults, as sentence-transformers runs.") in single
    assert "one run on one machine (" in single and "--seeds 42 43 44 --json bench-results/finetune-peers.json`" in single
    # the CPU's make where the parts recorded it: a masked "AMD EPYC" alone does not say which one it was
    merged["machine"] = {**merged["machine"], "cpu": "AMD EPYC", "cpu_id": "AuthenticAMD family 25 model 17 stepping 1",
                         "cpu_isa": ["avx2", "avx512_bf16"]}
    md = "\n".join(benchmarks.peers_lines(merged, "bench-results"))
    assert "2 runs on one machine type (AMD EPYC (AuthenticAMD family 25 model 17 stepping 1; avx2 avx512_bf16), " in md
    assert "model name only" not in md


def test_the_same_bench_on_another_machine_type_has_its_own_subsection_and_merge_command(tmp_path):
    """--peers-elsewhere: each merged grid of another CPU below the page's own, its merge writing its own file."""
    # absolute paths where a part ran: a clone's inputs, a part beside it, a scratch folder (no "data/" in it)
    clone, beside, scratch = tmp_path / "clone", tmp_path / "repo", tmp_path / "scratch"
    zen3 = {**MACHINE, "cpu": "AMD EPYC", "cpu_id": "AuthenticAMD family 25 model 1 stepping 1", "cpu_isa": ["avx2"]}
    other = {**_peers(["ours-hard", "st-mnrl"], [42]), "machine": zen3, "ours_keeps_freed_memory": True, "pieces": [
        {"file": "bench-results/z/a.json", "date": "2026-12-06", "args": ["--only", "ours-hard", "--json", "a.json"],
         "rows": [["ours-hard", 42]]},
        {"file": "bench-results/z/b.json", "date": "2026-12-07", "args": [
            "--dataset", str(clone / "data" / "prepared" / "scifact"), "--reuse", str(beside / "bench-results" / "z" / "a.json"),
            "--only", "st-mnrl", "--workdir", str(scratch), "--json", "b.json"], "rows": [["st-mnrl", 42]]}]}
    md = "\n".join(benchmarks.finetune_section(None, "bench-results", _peers(["ours-hard", "st-mnrl"], [42]), None,
                                               [("bench-results/z/merged.json", other)]))
    heading = ("### The same bench on another machine type: AMD EPYC (AuthenticAMD family 25 model 1 stepping 1; avx2) "
               "(`bench-results/z/merged.json`)")
    assert md.count("### ") == 1 and heading in md
    own, elsewhere = md.split(heading)
    assert "--json bench-results/finetune-peers.json`" in own and "finetune-peers.json" not in elsewhere
    assert "--merge bench-results/z/a.json bench-results/z/b.json --json bench-results/z/merged.json`." in elsewhere
    # a part's absolute inputs shown from a checkout's root: the command runs in the reader's clone
    assert (f"--dataset data/prepared/scifact --reuse bench-results/z/a.json --only st-mnrl --workdir {scratch} --json "
            "bench-results/z/b.json`") in elsewhere and str(clone) not in md and str(beside) not in md
    assert "2 runs on one machine type (AMD EPYC (AuthenticAMD family 25 model 1 stepping 1; avx2)" in elsewhere
    assert len(_rows(elsewhere, "ours, `train@hard`")) == 1 and "**Partial**" in elsewhere
    alone = "\n".join(benchmarks.finetune_section(None, "bench-results", None, None, [("z.json", other)]))
    assert "Not run" not in alone and "(`z.json`)" in alone
