"""The user's own retriever in the real pipeline: dvc.yaml's retrieve-external / evaluate-external stages, in
``compare`` and in ``report --fail-on-regression``, and only its own stages stale when its module changes.

A scratch git + DVC repository (module fixture) holds a tiny BEIR dataset with test judgments alone (what
pooling gives) at ``data/raw/toy``, this worktree's ``src`` (the stages' code dependencies), the repository's
params.yaml with two external retrievers (``alpha``, ``beta``: callables in folders of their own) and the
repository's dvc.yaml cut to prepare, BM25, the external stages and ``compare``, whose deps and ``--runs`` name the external runs as
docs/own-retriever.md tells a user to, and the repository's .gitignore (what a clone has: latency/ is ignored).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml
from beir_fixtures import REPO, write_beir
from pipeline_fixtures import sh

from retrieval_lab.core.params_file import load_params
from retrieval_lab.pipeline_names import names_of

QUERIES = 24
RUNS = ("bm25", "alpha", "beta")
MODULE = '''"""{name}: ranks "doc <n>" for "about <n>" at position {rank} among fillers (a toy of the user's system)."""


def search(texts, k):
    out = []
    for text in texts:
        n = int(text.split()[-1])
        fillers = [f"x{{(n + j) % 30}}" for j in range(k)]
        ranked = fillers[:{rank} - 1] + [f"p{{n}}"] + fillers[{rank} - 1:]
        out.append([(doc, 1.0 / (i + 1)) for i, doc in enumerate(ranked[:k])])
    return out
'''


def _dataset(repo: Path) -> None:
    corpus = [{"_id": f"p{i}", "title": f"doc {i}", "text": f"topic{i} answer{i} procedure"} for i in range(QUERIES)]
    corpus += [{"_id": f"x{j}", "title": "", "text": f"generic filler page number{j}"} for j in range(30)]
    queries = [{"_id": f"q{i}", "text": f"topic{i} about {i}"} for i in range(QUERIES)]
    # test judgments alone, as pooling gives them: prepare takes them (issue 51), no strata, nothing to train
    write_beir(repo / "data" / "raw" / "toy", corpus, queries, {"test": [(f"q{i}", f"p{i}", 1) for i in range(QUERIES)]})


def _module(repo: Path, name: str, rank: int) -> None:
    folder = repo / "ext" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}_search.py").write_text(MODULE.format(name=name, rank=rank), encoding="utf-8")
    (folder / "config.json").write_text(json.dumps({"rank": rank}), encoding="utf-8")


def _dvc_yaml() -> dict:
    real = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))
    keep = {"prepare", "index", "retrieve", "evaluate", "retrieve-external", "evaluate-external", "compare"}
    stages = {name: stage for name, stage in real["stages"].items() if name in keep}
    compare = stages["compare"]
    runs = ["bm25", "alpha", "beta"]
    # what docs/own-retriever.md tells a user: the external runs in --runs and their files in deps
    before, _, after = compare["cmd"].partition("--runs ")
    compare["cmd"] = before + "--runs " + " ".join(runs) + " --output" + after.partition(" --output")[2]
    compare["deps"] = [d for d in compare["deps"] if not d.startswith(("reports/", "runs/"))]
    compare["deps"] += [f"reports/${{names.dataset}}/{r}/{f}" for r in runs for f in ("per_query.json", "diagnosis.json")]
    compare["deps"] += [f"runs/${{names.dataset}}/{r}.trec" for r in runs]  # the comparison page's rankings
    return {"vars": [{"lexical": {"bm25": real["vars"][0]["lexical"]["bm25"]}}, {"names": {}}], "stages": stages}


def _params(repo: Path) -> dict:
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params["dataset"] = "toy"
    params["retrieve"]["depth"] = 10
    params["evaluate"].update(measures=["RR@10", "nDCG@10", "R@10", "Judged@10"], permutations=2000)
    params["compare"] = {"pairs": [["bm25", "alpha"], ["alpha", "beta"]], "measure": "RR@10",
                         "key_measures": ["nDCG@10"]}
    params["external"] = {name: {"path": f"ext/{name}", "callable": f"{name}_search:search", "concurrency": 2}
                          for name in ("alpha", "beta")}
    return params


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("external") / "repo"
    repo.mkdir()
    shutil.copytree(REPO / "src" / "retrieval_lab", repo / "src" / "retrieval_lab",
                    ignore=shutil.ignore_patterns("__pycache__"))
    _dataset(repo)
    _module(repo, "alpha", 1)
    _module(repo, "beta", 2)
    (repo / "params.yaml").write_text(yaml.safe_dump(_params(repo), sort_keys=False), encoding="utf-8")
    pipeline = _dvc_yaml()
    # the names block retrieval-lab names writes (its markers are comments, gone with the YAML round trip)
    pipeline["vars"][1]["names"] = asdict(names_of(load_params(repo / "params.yaml")))
    (repo / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False), encoding="utf-8")
    shutil.copy(REPO / ".gitignore", repo / ".gitignore")
    sh(["git", "init", "-q", "-b", "main"], repo)
    sh(["dvc", "init", "-q"], repo)
    sh(["dvc", "repro", "-q"], repo)
    sh(["git", "add", "-A"], repo)
    sh(["git", "commit", "-qm", "base"], repo)
    return repo


def _status(repo: Path) -> set[str]:
    return set(json.loads(sh(["dvc", "status", "--json"], repo).stdout or "{}"))


def test_every_retriever_is_timed_into_latency_and_its_latency_is_shown_when_asked(repo):
    for name in RUNS:
        metrics = json.loads((repo / "metrics" / "toy" / f"{name}.json").read_text())
        timing = json.loads((repo / "latency" / "toy" / f"{name}.json").read_text())
        assert "latency" not in metrics, name  # a wall time in a tracked file changes it on every run
        assert timing["summary"]["queries"] == QUERIES and timing["summary"]["p99_ms"] >= timing["summary"]["p50_ms"]
    calls = json.loads((repo / "latency" / "toy" / "alpha.json").read_text())["calls"]
    assert calls["failed"] == 0 and calls["answered"] == QUERIES and calls["unknown_ids"] == 0  # kept beside it
    assert json.loads((repo / "latency" / "toy" / "alpha.json").read_text())["summary"]["concurrency"] == 2
    assert json.loads((repo / "metrics" / "toy" / "alpha.json").read_text())["RR@10"] == 1.0
    # a collection with test judgments alone: no strata, and said so
    assert json.loads((repo / "metrics" / "toy" / "alpha.json").read_text())["strata_note"].startswith(
        "no training split: strata not computed")
    assert json.loads((repo / "metrics" / "toy" / "beta.json").read_text())["RR@10"] == 0.5
    compare = json.loads((repo / "metrics" / "toy" / "compare.json").read_text())
    assert compare["pairs"]["alpha vs beta"]["mean_difference"] == -0.5
    assert "latency" not in compare and "Latency" not in (repo / "reports" / "toy" / "compare.md").read_text()
    shown = sh(["retrieval-lab", "latency", "latency/toy"], repo).stdout  # asked: each run's numbers
    for name in RUNS:
        p50 = json.loads((repo / "latency" / "toy" / f"{name}.json").read_text())["summary"]["p50_ms"]
        assert f"| {name} | {QUERIES} | {2 if name != 'bm25' else 1} | {p50:.2f} |" in shown, shown
    assert f"| alpha | {QUERIES} | 2 | " in shown and f"| 0 of {QUERIES} |" in shown


def test_a_rerun_leaves_git_clean_and_measures_latency_anew(repo):
    """dvc.lock, every metrics JSON and compare's files keep their bytes; only the untracked latency/ changes."""
    lock = (repo / "dvc.lock").read_bytes()
    before = {name: (repo / "latency" / "toy" / f"{name}.json").read_bytes() for name in RUNS}
    ran = sh(["dvc", "repro", "-f", "compare"], repo).stdout  # compare and everything upstream, run again
    assert {"retrieve@bm25", "retrieve-external@alpha", "evaluate-external@beta", "compare"} <= set(
        re.findall(r"Running stage '([^']+)'", ran))
    assert sh(["git", "status", "--porcelain", "--untracked-files=all"], repo).stdout == ""
    assert (repo / "dvc.lock").read_bytes() == lock
    for name in RUNS:  # measured again: per-query wall times never repeat to the last bit
        after = (repo / "latency" / "toy" / f"{name}.json").read_bytes()
        assert after != before[name] and json.loads(after)["summary"]["queries"] == QUERIES, name


def test_editing_the_retriever_module_makes_only_its_own_stage_stale(repo):
    assert _status(repo) == set()
    for changed in (repo / "ext" / "alpha" / "alpha_search.py", repo / "ext" / "alpha" / "config.json"):
        original = changed.read_text()
        changed.write_text(original + "\n")
        try:
            assert _status(repo) == {"retrieve-external@alpha"}
        finally:
            changed.write_text(original)
    params = (repo / "params.yaml").read_text()
    (repo / "params.yaml").write_text(params.replace("concurrency: 2", "concurrency: 2\n    timeout: 5.0", 1))
    try:
        assert _status(repo) == {"retrieve-external@alpha"}  # its own params entry, not beta's
    finally:
        (repo / "params.yaml").write_text(params)
    assert _status(repo) == set()


def test_a_worse_external_retriever_fails_the_gate(repo, tmp_path):
    sh(["git", "checkout", "-q", "-b", "worse"], repo)
    try:
        _module(repo, "alpha", 4)  # the positive from rank 1 to rank 4 on every query
        sh(["dvc", "repro", "-q"], repo)
        sh(["git", "add", "-A"], repo)
        sh(["git", "commit", "-qm", "alpha: positives at rank 4"], repo)
        out = tmp_path / "pr"
        # a process of its own, as in CI: DVC's logging, set up in-process, would outlive this test's capture
        done = sh(["retrieval-lab", "report", "--base", "main", "--head", "worse", "--output", str(out),
                   "--fail-on-regression", "--timing-root", "latency/toy"], repo, check=False)
        printed = done.stdout
        assert done.returncode == 1, printed + done.stderr
        assert "REGRESSION: alpha RR@10 -0.7500" in printed
        report = (out / "report.md").read_text()
        # latency/ is untracked: no revision has it, and the report says so instead of showing nothing
        assert "## Latency" not in report
        assert "found at main for 0 of 3 retrievers, at worse for 0" in report
        assert "compare two such folders with `retrieval-lab latency DIR --base OTHER_DIR`" in report
    finally:
        sh(["git", "checkout", "-q", "main"], repo)
        sh(["dvc", "checkout", "-q"], repo)


def test_a_collection_with_test_judgments_alone_declares_no_training_stage(tmp_path):
    # the repository's whole dvc.yaml with train.variants empty: no mine or train stage is declared (issue 51)
    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params.update(dataset="toy", compare={"pairs": [["bm25", "dense"]]})
    params["train"]["variants"] = {}
    params["fusion"].update(dense="dense")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    sh(["git", "init", "-q"], tmp_path)
    sh(["dvc", "init", "-q"], tmp_path)
    sh(["retrieval-lab", "names"], tmp_path)
    stages = {line.split()[0] for line in sh(["dvc", "stage", "list"], tmp_path).stdout.splitlines()}
    assert {"prepare", "index@bm25", "retrieve@bm25", "evaluate@bm25", "encode@dense", "fuse@rrf", "compare"} <= stages
    assert not {s for s in stages if s.startswith(("mine@", "train@", "retrieve-ft@", "evaluate-ft@"))}
    # compare reads exactly the runs its pairs name (it read dense-ft-hard's files and failed: issue 51)
    from dvc.repo import Repo

    (compare,) = Repo(str(tmp_path)).stage.collect(f"{tmp_path}/dvc.yaml:compare")  # a target relative to the cwd
    assert " --runs bm25 dense --output " in compare.cmd
    inputs = sorted(str(d.def_path) for d in compare.deps if str(d.def_path).startswith(("reports/", "runs/")))
    assert inputs == ["reports/toy/bm25/diagnosis.json", "reports/toy/bm25/per_query.json",
                      "reports/toy/dense/diagnosis.json", "reports/toy/dense/per_query.json", "runs/toy/bm25.trec",
                      "runs/toy/dense.trec"]
