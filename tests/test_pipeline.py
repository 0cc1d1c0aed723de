"""The real pipeline, end to end, in throw-away copies of the repository.

One full ``dvc repro`` of the embedded dataset (module fixture) serves every test here:
outputs and metrics exist, the run matches the committed dvc.lock bit for bit
(two clean runs, the committed one and this one, give identical hashes), a param
change reruns only what depends on it, a SIGKILLed stage leaves no partial output,
and the branch-to-branch review flow works through a bare origin and a DVC remote.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from beir_fixtures import REPO
from pipeline_fixtures import clone_working_tree, env, lock_hashes, sh

from retrieval_lab.core.atomic import HOLD_ENV

pytestmark = pytest.mark.slow

RETRIEVERS = ["bm25", "lsa", "dense", "dense-ft-hard", "dense-ft-random", "dense-ft-temperature",
              "fused-rrf", "fused-weighted"]


def ran_stages(output: str) -> set[str]:
    return set(re.findall(r"Running stage '([^']+)'", output))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    repo = clone_working_tree(tmp_path_factory.mktemp("pipeline") / "repo")
    started = time.perf_counter()
    proc = sh(["dvc", "repro"], repo)
    print(f"full dvc repro of the embedded pipeline: {time.perf_counter() - started:.0f} s")
    (repo / "repro.log").write_text(proc.stdout)
    return repo


def test_repro_builds_every_stage_and_metric(built):
    status = sh(["dvc", "status"], built).stdout
    assert "up to date" in status, status
    for name in RETRIEVERS:
        metrics = json.loads((built / "metrics" / "support" / f"{name}.json").read_text())
        assert 0.0 < metrics["nDCG@10"] <= 1.0 and metrics["queries_evaluated"] == 70, (name, metrics)
    compare = json.loads((built / "metrics" / "support" / "compare.json").read_text())
    assert "dense vs dense-ft-hard" in compare["pairs"]
    audit = json.loads((built / "data" / "mined" / "support" / "hard" / "mining-audit.json").read_text())
    assert audit["passed"] and audit["checks"]["no_annotated_positive"]
    assert audit["checks"]["false_negative_fraction"] == 0.0
    shown = sh(["dvc", "metrics", "show", "--json"], built).stdout
    assert all(f"metrics/support/{name}.json" in shown for name in RETRIEVERS)
    plots = json.loads(sh(["dvc", "plots", "show", "--json"], built).stdout)
    assert not plots.get("errors"), plots.get("errors")
    assert {"recall_at_k", "training_loss", "reports/support/dense/first_positive_hist.csv"} <= set(plots["data"])


def test_clean_run_reproduces_the_committed_lock(built):
    committed = yaml.safe_load((REPO / "dvc.lock").read_text()) if (REPO / "dvc.lock").exists() else None
    if committed is None:
        pytest.fail("dvc.lock is not committed")
    expected = {o["path"]: o["md5"] for s in committed["stages"].values() for o in s.get("outs", [])}
    produced = lock_hashes(built)
    assert produced.keys() == expected.keys()
    differing = sorted(p for p in expected if expected[p] != produced[p])
    assert differing == [], f"outputs whose bytes differ from the committed dvc.lock: {differing}"


def test_sigkilled_stage_leaves_no_partial_output_and_repro_recovers(built):
    target = built / "models" / "finetuned" / "support" / "hard"
    before = lock_hashes(built)
    shutil.rmtree(target)
    stage = yaml.safe_load((built / "dvc.lock").read_text())["stages"]["train@hard"]
    # Hold each finished temporary output 600 s before its rename: the kill lands while the
    # model folder is fully written but not yet in place, the worst moment for a crash.
    proc = subprocess.Popen(stage["cmd"], shell=True, cwd=built, env={**env(), HOLD_ENV: "600"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 900
    while time.time() < deadline and not list(target.parent.glob(".hard.tmp-*/model.safetensors")):
        assert proc.poll() is None, "the training command ended before writing its model"
        time.sleep(0.2)
    time.sleep(2.0)  # the writer is now asleep before the rename
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert list(target.parent.glob(".hard.tmp-*")), "the kill did not land while the output was being written"
    assert not target.exists(), "a killed stage left a partial output where DVC would cache it"
    out = sh(["dvc", "repro"], built).stdout
    assert "train@hard" in ran_stages(out)
    after = lock_hashes(built)
    assert after == before, sorted(p for p in before if before[p] != after.get(p))
    assert not list(target.parent.glob(".hard.tmp-*"))


def test_param_change_reruns_only_what_depends_on_it(built):
    params = yaml.safe_load((built / "params.yaml").read_text())
    params["fusion"]["rrf_k_grid"] = [1]  # a different grid picks a different k: the fused run changes
    (built / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = sh(["dvc", "repro"], built).stdout
    assert ran_stages(out) == {"fuse@rrf", "evaluate@fused-rrf", "compare"}, out
    sh(["git", "checkout", "params.yaml"], built)
    sh(["dvc", "repro"], built)  # back to the committed state for the next test


def test_branch_review_flow_through_git_and_dvc_remotes(built, tmp_path):
    origin, store = tmp_path / "origin.git", tmp_path / "dvc-store"
    sh(["dvc", "remote", "modify", "local", "url", str(store)], built)
    sh(["git", "add", "-A"], built)
    sh(["git", "commit", "-qm", "results of main"], built)
    sh(["dvc", "push"], built)
    sh(["git", "clone", "-q", "--bare", str(built), str(origin)], tmp_path)

    a = tmp_path / "a"
    sh(["git", "clone", "-q", str(origin), str(a)], tmp_path)
    sh(["dvc", "pull"], a)
    assert "up to date" in sh(["dvc", "status"], a).stdout
    sh(["git", "checkout", "-q", "-b", "rrf-grid"], a)
    params = yaml.safe_load((a / "params.yaml").read_text())
    params["fusion"]["rrf_k_grid"] = [1]
    (a / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert ran_stages(sh(["dvc", "repro"], a).stdout) == {"fuse@rrf", "evaluate@fused-rrf", "compare"}
    sh(["git", "add", "-A"], a)
    sh(["git", "commit", "-qm", "RRF: tune k on a one-point grid"], a)
    sh(["git", "push", "-q", "origin", "rrf-grid"], a)
    sh(["dvc", "push"], a)

    b = tmp_path / "b"
    sh(["git", "clone", "-q", str(origin), str(b)], tmp_path)
    sh(["git", "fetch", "-q", "origin"], b)
    sh(["dvc", "pull"], b)
    diff = json.loads(sh(["dvc", "metrics", "diff", "--json", "main", "origin/rrf-grid"], b).stdout)
    changed = {path for path, values in diff.items() if any(v.get("diff") for v in values.values())}
    assert changed == {"metrics/support/fused-rrf.json", "metrics/support/compare.json"}, diff

    sh(["retrieval-lab", "report", "--base", "main", "--head", "origin/rrf-grid", "--output", "pr"], b)
    report = (b / "pr" / "report.md").read_text()
    assert "| fused-rrf |" in report and "Queries that moved most" in report
    assert (b / "pr" / "recall_fused-rrf.png").stat().st_size > 10_000
    shutil.copytree(b / "pr", REPO / ".pytest-artifacts" / "pr-report", dirs_exist_ok=True)  # for a human look
