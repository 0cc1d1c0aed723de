"""The cross-CPU comparison of metrics files (reproducibility contract, level 2), on tiny folders."""

from __future__ import annotations

import json
from pathlib import Path

from retrieval_lab.reproducibility import drift


def _folder(root: Path, files: dict[str, dict]) -> Path:
    root.mkdir()
    for name, content in files.items():
        (root / f"{name}.json").write_text(json.dumps(content), encoding="utf-8")
    return root


def test_measures_are_compared_bookkeeping_is_not_and_bm25_must_be_exact(tmp_path):
    committed = _folder(tmp_path / "a", {
        "bm25": {"nDCG@10": 0.5, "queries_evaluated": 70},
        "dense": {"nDCG@10": 0.70, "R@10": 0.80, "depth": 100},
        "compare": {"pairs": {"x vs y": {"mean_difference": 0.05, "ci_low": 0.01, "p_value": 0.01, "wins": 3}}},
    })
    produced = _folder(tmp_path / "b", {
        "bm25": {"nDCG@10": 0.5 + 1e-12, "queries_evaluated": 71},  # last bits: not allowed for BM25
        "dense": {"nDCG@10": 0.72, "R@10": 0.84, "depth": 99},      # +0.02 within, +0.04 beyond 0.03
        "compare": {"pairs": {"x vs y": {"mean_difference": 0.06, "ci_low": 0.01, "p_value": 0.5, "wins": 9}}},
    })
    problems, largest = drift(committed, produced, tolerance=0.03)
    assert len(problems) == 2
    assert problems[0].startswith("bm25.json nDCG@10: committed 0.5, produced 0.500000000001")
    assert problems[1].startswith("dense.json R@10: committed 0.8, produced 0.84")
    # largest over the neural files: |0.84 - 0.80| = 0.04 (counts, depth, p and wins are not measures)
    assert abs(largest - 0.04) < 1e-12


def test_a_file_or_measure_on_one_side_only_is_named(tmp_path):
    committed = _folder(tmp_path / "a", {"dense": {"nDCG@10": 0.7, "R@10": 0.8}, "lsa": {"nDCG@10": 0.5}})
    produced = _folder(tmp_path / "b", {"dense": {"nDCG@10": 0.7}})
    problems, _ = drift(committed, produced)
    assert problems == ["dense.json R@10: only in one of the two", f"lsa.json: only in {committed}"]


def test_wall_times_are_left_out_and_nothing_else():
    from retrieval_lab.reproducibility import carries_latency, without_latency

    a = b'{\n  "nDCG@10": 0.5,\n  "latency": {"p50_ms": 1.0}\n}\n'
    b = b'{\n  "nDCG@10": 0.5,\n  "latency": {"p50_ms": 2.0}\n}\n'
    c = b'{\n  "nDCG@10": 0.6,\n  "latency": {"p50_ms": 1.0}\n}\n'
    path = "metrics/support/bm25.json"
    assert carries_latency(path) and without_latency(path, a) == without_latency(path, b) != without_latency(path, c)
    md = "# Paired comparison\n\n| a | b |\n\n## Latency (baseline → candidate)\n| 1.0 |\n"
    other = md.replace("| 1.0 |", "| 2.0 |")
    assert without_latency("reports/support/compare.md", md.encode()) == \
        without_latency("reports/support/compare.md", other.encode()) == b"# Paired comparison\n\n| a | b |\n"
    assert without_latency("reports/support/bm25/timing.json", b"{}") is None
    assert not carries_latency("runs/support/bm25.trec") and not carries_latency("reports/support/bm25/per_query.json")
    assert without_latency("runs/support/bm25.trec", b"q1 Q0 d1 1 2.0 bm25\n") == b"q1 Q0 d1 1 2.0 bm25\n"
