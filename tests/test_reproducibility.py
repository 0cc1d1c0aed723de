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


def test_no_output_the_pipeline_declares_holds_a_wall_time():
    """Every retrieve stage times its run into latency/, which no stage declares (DVC records every declared
    output's hash in dvc.lock, cached or not) and git ignores; no stage reads a timing. So a rerun on the same
    machine leaves dvc.lock, the metrics JSONs and compare's files the same bytes."""
    import shlex
    import subprocess

    from beir_fixtures import REPO
    from pipeline_fixtures import stage_graph

    graph = stage_graph(REPO)
    timed = {}
    for name, (cmd, deps, outs) in graph.items():
        args = shlex.split(cmd)
        assert "--timing-root" not in args, name
        if "--timing" in args:
            timed[name] = args[args.index("--timing") + 1]
        declared = [*deps, *outs]
        assert not [p for p in declared if "timing" in Path(p).name or p.split("/")[0] == "latency"], name
    assert set(timed) == {name for name in graph if name.startswith("retrieve")}  # evaluate reads none
    assert all(path.startswith("latency/") and path.endswith(".json") for path in timed.values()), timed
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *timed.values()], cwd=REPO, check=False,
                             capture_output=True, text=True).stdout.split()  # exit 1: none ignored
    assert sorted(ignored) == sorted(timed.values())
