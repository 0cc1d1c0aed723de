"""scripts/readme_tables.py: README.md's result tables are what the committed metrics say."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from beir_fixtures import REPO

SCRIPT = REPO / "scripts" / "readme_tables.py"
PARAMS = REPO / "params.yaml"


def _script(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(SCRIPT), *args], check=False, capture_output=True, text=True,
                          env=env, timeout=120)


def test_the_committed_readme_matches_the_committed_metrics():
    result = _script("--check")
    assert result.returncode == 0, result.stderr


def _compare(pairs: dict) -> dict:
    return {"measure": "nDCG@10", "adjustment": "bonferroni", "family_size": len(pairs), "family_level": 0.95,
            "level": 0.95, "permutations": 1000, "seed": 1, "power": 0.8, "pairs": pairs}


def test_tables_are_written_between_the_markers_and_checked(tmp_path):
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    # bm25: 0.57155 rounds up to 0.5716; R@100 is missing ("-"); "zeta" is no known run: it follows the
    # known ones under its own name
    (metrics / "bm25.json").write_text(json.dumps({"nDCG@10": 0.57155, "R@10": 0.5, "RR@10": 1 / 3,
                                                   "AP@100": 0.25, "Success@1": 0.0, "queries_evaluated": 2}))
    (metrics / "zeta.json").write_text(json.dumps({"nDCG@10": 1, "R@10": 1, "R@100": 1, "RR@10": 1,
                                                   "AP@100": 1, "Success@1": 1, "queries_evaluated": 2}))
    pair = {"baseline": "bm25", "candidate": "zeta", "queries": 2, "queries_only_in_one": 0,
            "baseline_mean": 0.57155, "candidate_mean": 1.0, "mean_difference": 0.42846, "ci_low": 0.1,
            "ci_high": 0.7, "p_value": 0.01, "p_adjusted": 0.01, "mde": 0.3, "wins": 2, "ties": 0, "losses": 0,
            "verdict": "candidate better", "level": 0.95, "tail": 10}
    (metrics / "compare.json").write_text(json.dumps(_compare({"bm25 vs zeta": pair})))
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- results:support:start -->\nold\n<!-- results:support:end -->\nmiddle\n"
                      "<!-- results:support-compare:start -->\n<!-- results:support-compare:end -->\nend\n")
    args = ["--readme", str(readme), "--metrics", str(metrics), "--params", str(PARAMS)]
    assert _script(*args, "--check").returncode == 1
    written = _script(*args)
    assert written.returncode == 0, written.stderr
    text = readme.read_text()
    assert text.startswith("intro\n<!-- results:support:start -->\n"
                           "| run | nDCG@10 | R@10 | R@100 | RR@10 | AP@100 | Success@1 |\n"
                           "|---|---:|---:|---:|---:|---:|---:|\n"
                           "| bm25 | 0.5716 | 0.5000 | - | 0.3333 | 0.2500 | 0.0000 |\n"
                           "| zeta | 1.0000 | 1.0000 | 1.0000 | 1.0000 | 1.0000 | 1.0000 |\n"
                           "<!-- results:support:end -->\nmiddle\n")
    assert "| bm25 | zeta | 2 | 0.5716 | 1.0000 | +0.4285 | [+0.1000, +0.7000] |" in text
    assert text.endswith("<!-- results:support-compare:end -->\nend\n")
    assert _script(*args, "--check").returncode == 0

    (metrics / "zeta.json").write_text(json.dumps({"nDCG@10": 0.9, "queries_evaluated": 2}))
    stale = _script(*args, "--check")
    assert stale.returncode == 1 and "block results:support differs" in stale.stderr
    assert "support-compare" not in stale.stderr


def test_a_readme_without_the_markers_is_refused(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("no markers here\n")
    result = _script("--readme", str(readme), "--check")
    assert result.returncode == 1
    assert f"{readme}: expected one <!-- results:support:start -->" in result.stderr
    assert readme.read_text() == "no markers here\n"
