"""The real pipeline, end to end, in throw-away copies of the repository: the reproducibility contract.

- Level 1, same machine and thread count: two clean ``dvc repro`` runs made here, the second
  interrupted by a SIGKILL mid-stage and recovered by ``dvc repro``, give identical bytes for
  every output, metrics JSONs and compare's files included (wall times go to the untracked
  latency/, no output). Nothing is compared with bytes made on another machine.
- Level 2, any x86-64 CPU: outputs of the stages that read only text and integers equal the
  committed dvc.lock; every measure of every committed metrics file is within
  ``reproducibility.MEASURE_TOLERANCE`` (exact for lexical runs).
- Level 3, after ``dvc pull``: exact bytes, ``dvc status`` clean, ``dvc repro`` a no-op
  (in the branch review flow, through a bare git origin and a DVC remote).

Also: a param change reruns only what depends on it (in the branch review flow), a training value put back
is restored from DVC's run cache, and an edit to a module is seen by exactly the stages that run it.

The two runs are made once per session, side by side in the background (``conftest.py``,
``pipeline_fixtures.py``); every test here shares the first and leaves it as it found it.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from beir_fixtures import REPO
from pipeline_fixtures import (
    COMPARED_PAIR,
    DATASET,
    KILLED_OUTPUT,
    KILLED_STAGE,
    MINED_HARD,
    NOT_REPEATED_KINDS,
    RETRIEVERS,
    RRF_STAGES,
    RUNS_NON_READERS,
    RUNS_READERS,
    TRAIN_STAGES,
    lock_hashes,
    sh,
    stage_graph,
    write_names,
)

from retrieval_lab.reproducibility import EXACT_STAGES, drift

pytestmark = pytest.mark.slow


def ran_stages(output: str) -> set[str]:
    return set(re.findall(r"Running stage '([^']+)'", output))


def committed_lock() -> dict:
    if not (REPO / "dvc.lock").exists():
        pytest.fail("dvc.lock is not committed")
    return yaml.safe_load((REPO / "dvc.lock").read_text(encoding="utf-8"))


@pytest.fixture
def built(built_pipeline) -> Path:
    return built_pipeline.repo


def test_repro_builds_every_stage_and_metric(built):
    status = sh(["dvc", "status"], built).stdout
    assert "up to date" in status, status
    for name in RETRIEVERS:
        metrics = json.loads((built / "metrics" / DATASET / f"{name}.json").read_text())
        assert 0.0 < metrics["nDCG@10"] <= 1.0 and metrics["queries_evaluated"] == 70, (name, metrics)
    for name in RETRIEVERS:  # every retrieve stage timed its run (fusion reads two runs) into latency/, untracked
        assert "latency" not in json.loads((built / "metrics" / DATASET / f"{name}.json").read_text()), name
        timing = built / "latency" / DATASET / f"{name}.json"
        if name.startswith("fused-"):
            assert not timing.exists(), name
            continue
        latency = json.loads(timing.read_text())["summary"]
        assert latency["queries"] > 0 and 0 < latency["p50_ms"] <= latency["p95_ms"] <= latency["p99_ms"], name
        assert latency["concurrency"] == 1 and latency["machine"]["cpu_count"] >= 1, name
    assert sh(["git", "status", "--porcelain", "--untracked-files=all", "latency"], built).stdout == ""  # ignored
    compare = json.loads((built / "metrics" / DATASET / "compare.json").read_text())
    assert COMPARED_PAIR in compare["pairs"] and "latency" not in compare  # shown when asked, not in the pipeline
    audit = json.loads((built / MINED_HARD / "mining-audit.json").read_text())
    assert audit["passed"] and audit["checks"]["no_annotated_positive"]
    assert audit["checks"]["false_negative_fraction"] == 0.0
    shown = sh(["dvc", "metrics", "show", "--json"], built).stdout
    assert all(f"metrics/{DATASET}/{name}.json" in shown for name in RETRIEVERS)
    plots = json.loads(sh(["dvc", "plots", "show", "--json"], built).stdout)
    assert not plots.get("errors"), plots.get("errors")
    assert {"recall_at_k", "training_loss", f"reports/{DATASET}/dense/first_positive_hist.csv"} <= set(plots["data"])


def test_text_and_integer_outputs_equal_the_committed_lock(built):
    """Level 2: generate, prepare and BM25 (and its evaluation) are the same bytes on every CPU."""
    committed, produced = committed_lock(), yaml.safe_load((built / "dvc.lock").read_text(encoding="utf-8"))
    checked = []
    for stage in EXACT_STAGES:
        assert stage in committed["stages"], f"{stage} is not in the committed dvc.lock"
        produced_outs = {o["path"]: o for o in produced["stages"][stage]["outs"]}
        assert produced_outs.keys() == {o["path"] for o in committed["stages"][stage]["outs"]}, \
            f"{stage}: its outputs are not the committed dvc.lock's (dvc.yaml changed: commit a regenerated dvc.lock)"
        for want in committed["stages"][stage]["outs"]:
            got = produced_outs[want["path"]]
            assert got["md5"] == want["md5"], f"{stage}: {want['path']} differs from the committed dvc.lock"
            checked.append(want["path"])
    assert f"runs/{DATASET}/bm25.trec" in checked and f"data/prepared/{DATASET}" in checked


def test_the_committed_lock_holds_the_code_and_params_a_clean_run_reads(built):
    """A fresh clone's ``dvc repro`` leaves ``git status`` clean only if the committed dvc.lock records the hashes
    of this code and these params: after changing either, commit the dvc.lock ``dvc repro`` wrote. Dependencies
    that another stage makes are left out (neural ones differ in their last bits between CPUs)."""
    committed, produced = committed_lock(), yaml.safe_load((built / "dvc.lock").read_text(encoding="utf-8"))
    made = {o["path"] for entry in produced["stages"].values() for o in entry.get("outs", [])}

    def sources(entry: dict) -> dict[str, str]:
        return {d["path"]: d.get("md5") for d in entry.get("deps", [])
                if not any(d["path"] == o or d["path"].startswith(o.rstrip("/") + "/") for o in made)}

    stale = [stage for stage, entry in produced["stages"].items()
             if stage not in committed["stages"] or sources(entry) != sources(committed["stages"][stage])
             or entry.get("params") != committed["stages"][stage].get("params")]
    assert stale == [], f"the committed dvc.lock is stale for {stale}: run dvc repro and commit its dvc.lock"
    assert all(sources(entry) for entry in produced["stages"].values() if entry.get("deps"))


def test_every_measure_is_within_tolerance_of_the_committed_metrics(built):
    """Level 2: neural results drift in their last bits between CPUs; their measures barely move."""
    problems, largest = drift(REPO / "metrics" / DATASET, built / "metrics" / DATASET)
    print(f"largest drift of a measure from the committed metrics: {largest:.2e}")
    assert problems == [], "\n".join(problems)


def test_a_second_clean_run_killed_midway_gives_identical_bytes(built_pipeline, second_pipeline_run):
    """Level 1: a second clean run on this machine, SIGKILLed inside a stage, then recovered.

    The kill lands while the stage's output folder is written but not yet renamed into place (the
    worst moment for a crash): nothing partial may be left where DVC would cache it, and the
    recovering ``dvc repro`` must give the first run's bytes for every output. The killed stage
    (``pipeline_fixtures.KILLED_STAGE``) is a cheap one: what is under test is the crash, not the
    stage.
    """
    second = second_pipeline_run
    target = Path(KILLED_OUTPUT).name
    assert second.killed.temporaries_at_kill, "the kill did not land while the output was being written"
    assert all(name.startswith(f".{target}.tmp-") for name in second.killed.temporaries_at_kill)
    assert not second.killed.output_existed_at_kill, "a killed stage left a partial output where DVC would cache it"

    assert KILLED_STAGE in ran_stages(second.recovery_log)
    assert second.temporaries_after == [], "the recovery left the killed run's temporary"
    # the second run makes every kind of stage but training and what reads a fine-tuned run (pipeline_fixtures) ...
    kinds = {name.partition("@")[0] for name in stage_graph(built_pipeline.repo)}
    assert {name.partition("@")[0] for name in second.stages} == kinds - set(NOT_REPEATED_KINDS)
    assert {"encode@dense", "retrieve-dense@dense", "retrieve@lsa", "mine@hard", "evaluate@bm25"} <= set(second.stages)
    # ... and every output it made has the first run's bytes
    first, again = built_pipeline.hashes, second.build.hashes
    assert len(again) >= 0.3 * len(first) and again.keys() <= first.keys()  # 31 of the 101 outputs
    differ = [p for p in again if first[p] != again[p]]  # metrics JSONs too: no wall time
    assert sorted(differ) == [], "outputs whose bytes differ between two runs"


def test_stages_the_second_run_leaves_out_rerun_to_the_same_bytes(built):
    """fuse, evaluate-fused and compare, which the second clean run leaves out (they read fine-tuned runs), forced
    to run again in their own processes: their runs, metrics JSONs, compare's Markdown and page are the first run's
    bytes (the sign flips are seeded)."""
    before = lock_hashes(built)
    left_out = sorted(name for name in stage_graph(built)
                      if name.partition("@")[0] in {"fuse", "evaluate-fused", "compare"})
    assert len(left_out) == 5, left_out
    out = sh(["dvc", "repro", "--force", "--single-item", *left_out], built).stdout
    assert ran_stages(out) == set(left_out), out
    assert lock_hashes(built) == before


def test_a_module_edit_is_seen_by_exactly_the_stages_that_run_it(built):
    """dvc status names the stages whose code changed (what follows them reruns from their outputs)."""
    def stages_after_editing(module: str) -> set[str]:
        path = built / "src" / "retrieval_lab" / module
        original = path.read_text(encoding="utf-8")
        path.write_text(original + "\n# edited\n", encoding="utf-8")
        try:
            status = json.loads(sh(["dvc", "status", "--json"], built).stdout or "{}")
        finally:
            path.write_text(original, encoding="utf-8")
        return set(status)

    by_runs = stages_after_editing("runs.py")
    assert RUNS_READERS <= by_runs
    assert not by_runs & RUNS_NON_READERS
    assert stages_after_editing("training/loop.py") == TRAIN_STAGES
    assert "up to date" in sh(["dvc", "status"], built).stdout


def test_another_model_lock_is_seen_by_the_dense_stages_only(built):
    """Pointing dense.models.dense at another lock: encode and training change; lexical stages never."""
    params_path = built / "params.yaml"
    original = params_path.read_text(encoding="utf-8")
    shutil.copy(built / "models" / "base.lock.json", built / "models" / "other.lock.json")
    params = yaml.safe_load(original)
    params["dense"]["models"]["dense"] = "models/other.lock.json"
    params_path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    try:
        write_names(built)  # the lock's path reaches encode's dependency through dvc.yaml's names block
        status = set(json.loads(sh(["dvc", "status", "--json"], built).stdout or "{}"))
    finally:
        params_path.write_text(original, encoding="utf-8")
        sh(["git", "checkout", "dvc.yaml"], built)
        (built / "models" / "other.lock.json").unlink()
    # names reads dense.models whole (it checks the names; nothing follows it)
    assert status == {"names", "encode@dense"} | TRAIN_STAGES
    assert "up to date" in sh(["dvc", "status"], built).stdout


def test_a_training_value_changed_and_back_is_restored_from_the_run_cache(built):
    """DVC's run cache keeps a stage only when each output is cached or is a metric or plot; then putting
    a value back restores what that value made instead of training again (25 minutes on SciFact)."""
    stage, before = "train@query", lock_hashes(built)
    params = yaml.safe_load((built / "params.yaml").read_text())
    params["train"]["max_steps"] = 1  # one step: the cheapest training that differs (only train@query is rerun)
    (built / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert ran_stages(sh(["dvc", "repro", stage], built).stdout) == {stage}
    sh(["git", "checkout", "params.yaml"], built)
    out = sh(["dvc", "repro", stage], built).stdout
    assert ran_stages(out) == set() and f"Stage '{stage}' is cached - skipping run" in out, out
    assert lock_hashes(built) == before  # dvclive's metrics.json, kept by the run cache though not cached, too
    assert "up to date" in sh(["dvc", "status"], built).stdout


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
    # Level 3: a pulled clone holds the exact bytes, is clean, and has nothing to rerun (docs/reproducibility.md
    # names this test for all three)
    assert lock_hashes(a) == lock_hashes(built)
    assert "up to date" in sh(["dvc", "status"], a).stdout
    assert ran_stages(sh(["dvc", "repro"], a).stdout) == set()
    sh(["git", "checkout", "-q", "-b", "rrf-grid"], a)
    params = yaml.safe_load((a / "params.yaml").read_text())
    params["fusion"]["methods"]["rrf"]["grid"] = [1]
    (a / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert ran_stages(sh(["dvc", "repro"], a).stdout) == RRF_STAGES
    sh(["git", "add", "-A"], a)
    sh(["git", "commit", "-qm", "RRF: tune k on a one-point grid"], a)
    sh(["git", "push", "-q", "origin", "rrf-grid"], a)
    sh(["dvc", "push"], a)

    b = tmp_path / "b"
    sh(["git", "clone", "-q", str(origin), str(b)], tmp_path)  # the clone has origin/rrf-grid already
    sh(["dvc", "pull"], b)
    diff = json.loads(sh(["dvc", "metrics", "diff", "--json", "main", "origin/rrf-grid"], b).stdout)
    changed = {path for path, values in diff.items() if any(v.get("diff") for v in values.values())}
    assert changed == {f"metrics/{DATASET}/fused-rrf.json", f"metrics/{DATASET}/compare.json"}, diff

    sh(["retrieval-lab", "report", "--base", "main", "--head", "origin/rrf-grid", "--output", "pr"], b)
    report = (b / "pr" / "report.md").read_text()
    assert "| fused-rrf |" in report and "Queries that moved most" in report
    assert (b / "pr" / "recall_fused-rrf.png").stat().st_size > 10_000
    shutil.copytree(b / "pr", REPO / ".pytest-artifacts" / "pr-report", dirs_exist_ok=True)  # for a human look
