"""``retrieval-lab table``: seeds pooled, simultaneous intervals against a baseline, the stratified average
row, experiments read from DVC experiment refs without checking them out, and bad input."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from command_runner import run_command
from dvc_repos import DVC, git_env, new_dvc_repo, sh

from retrieval_lab.core.errors import InputError
from retrieval_lab.experiments_table import build, experiment_params, gather, to_csv, to_markdown

M = "nDCG@10"
P = 1999  # sign assignments


def _exp(name: str, dataset: str, seed: int, runs: dict[str, list[float]]) -> dict:
    return {"name": name, "commit": f"{name:0<40}", "params": {"dataset": dataset, "train.seed": seed, "x": 1},
            "runs": {r: {f"q{i}": {M: v} for i, v in enumerate(vals)} for r, vals in runs.items()}}


BASE_A = [0.2, 0.4, 0.6, 0.8, 0.2, 0.4, 0.6, 0.8]  # mean 0.5, the same for both seeds
# cand = base + d + e (seed 1) or base + d (seed 2), d = [.1, .2, .1, .1, .2, .1, .1, .1], e = [.2, 0, ...]
CAND_A1 = [0.5, 0.6, 0.7, 0.9, 0.4, 0.5, 0.7, 0.9]  # sum 5.2: mean 0.65
CAND_A2 = [0.1, 0.6, 0.7, 0.9, 0.4, 0.5, 0.7, 0.9]  # sum 4.8: mean 0.60
BASE_B = [0.0, 1.0, 0.5, 0.5]  # mean 0.5
CAND_B1 = [0.4, 1.0, 0.5, 0.9]  # mean 0.70
CAND_B2 = [0.2, 1.0, 0.9, 0.5]  # mean 0.65


def _inputs(**changes) -> dict:
    experiments = [_exp("a1", "A", 1, {"base": BASE_A, "cand": CAND_A1}),
                   _exp("a2", "A", 2, {"base": BASE_A, "cand": CAND_A2}),
                   _exp("b1", "B", 1, {"base": BASE_B, "cand": CAND_B1}),
                   _exp("b2", "B", 2, {"base": BASE_B, "cand": CAND_B2})]
    for e in experiments:
        e.update(changes.get(e["name"], {}))
    return {"runs": ["base", "cand"], "measures": [M], "experiments": experiments}


def _sign_flip_interval(d, j: int, seed: int) -> tuple[float, float]:
    """Independent of stats.py: the same P random sign vectors (numpy's generator, one draw), each
    vector's bracket [min, max] of the mean of d over its + and over its - queries (a vector of one
    sign: the whole line), then the (j+1)-th smallest lower end and the (j+1)-th largest upper end."""
    plus = np.random.default_rng(seed).random((P, len(d))) < 0.5
    lows, highs = [], []
    for row in plus:
        pos = [x for x, s in zip(d, row) if s]
        neg = [x for x, s in zip(d, row) if not s]
        if not pos or not neg:
            lows.append(-math.inf)
            highs.append(math.inf)
            continue
        a, b = sum(pos) / len(pos), sum(neg) / len(neg)
        lows.append(min(a, b))
        highs.append(max(a, b))
    return sorted(lows)[j], sorted(highs)[P - 1 - j]


def test_one_cell_seeds_difference_and_interval_by_hand():
    result = build(_inputs(), "base", family_level=0.95, permutations=P, seed=3)
    # rows A, B and the average; one retriever besides the baseline; one measure: 3 comparisons
    assert result["rows"] == ["A", "B", "average"] and result["family_size"] == 3
    # Bonferroni level 1 - 0.05/3; j = max{c : 3 (1 + c) / 2000 <= 0.05} = max{c : 1 + c <= 33.3} = 32
    assert result["level"] == pytest.approx(1 - 0.05 / 3)
    a = result["table"][M]["A"]
    # seeds: cand 0.65 and 0.60 -> mean 0.625, sd |0.65 - 0.60| / sqrt(2) = 0.0353553
    assert a["cand"]["seeds"] == pytest.approx([0.65, 0.60])
    assert a["cand"]["mean"] == pytest.approx(0.625) and a["cand"]["sd"] == pytest.approx(0.05 / math.sqrt(2))
    assert a["base"]["mean"] == pytest.approx(0.5) and a["base"]["sd"] == pytest.approx(0.0)
    assert "comparison" not in a["base"]
    c = a["cand"]["comparison"]
    # per-query values averaged over seeds: d = (CAND_A1 + CAND_A2) / 2 - BASE_A = [.1, .2, .1, .1, .2, .1, .1, .1]
    d = [0.1, 0.2, 0.1, 0.1, 0.2, 0.1, 0.1, 0.1]
    assert c["difference"] == pytest.approx(0.125) and c["queries"] == 8 and c["tail"] == 32
    low, high = _sign_flip_interval(d, 32, seed=3)
    assert (c["low"], c["high"]) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    # every split of d with both signs has both means in [0.1, 0.2]; one-sided vectors are 2/256 of 1999
    # (about 16 < 33), so the interval is finite, inside [0.1, 0.2] and excludes 0
    assert 0.1 - 1e-12 <= c["low"] <= 0.125 <= c["high"] <= 0.2 + 1e-12 and c["excludes_zero"]
    # B has 4 queries: a one-sign vector is 1/8 of the draws (about 250 > 33): no interval at this level
    b = result["table"][M]["B"]["cand"]
    assert b["comparison"]["difference"] == pytest.approx(0.175)
    assert b["comparison"]["low"] == -math.inf and not b["comparison"]["excludes_zero"]
    text = to_markdown(result)
    assert "| A (2 seeds) | 0.5000 ± 0.0000 | 0.6250 ± 0.0354 (+0.1250 [" in text
    assert f"[{low:+.4f}, {high:+.4f}] *) |" in text
    assert "| B (2 seeds) | 0.5000 ± 0.0000 | 0.6750 ± 0.0354 (+0.1750 [-inf, " in text
    assert "unbounded interval" in text


def test_the_average_row_weighs_collections_equally_and_flips_signs_within_them():
    result = build(_inputs(), "base", family_level=0.95, permutations=P, seed=3)
    avg = result["table"][M]["average"]["cand"]
    # per seed: (0.65 + 0.70) / 2 = 0.675 and (0.60 + 0.65) / 2 = 0.625 -> 0.65 ± 0.05 / sqrt(2)
    assert avg["seeds"] == pytest.approx([0.675, 0.625])
    assert avg["mean"] == pytest.approx(0.65) and avg["sd"] == pytest.approx(0.05 / math.sqrt(2))
    # difference (0.125 + 0.175) / 2 = 0.15, not the pooled mean over 12 queries (1.0 + 0.7) / 12 = 0.1417
    c = avg["comparison"]
    assert c["difference"] == pytest.approx(0.15) and c["queries"] == 12
    # each query's difference weighted N / (K n_c): A 12 / (2 * 8) = 0.75, B 12 / (2 * 4) = 1.5
    d = [0.75 * x for x in [0.1, 0.2, 0.1, 0.1, 0.2, 0.1, 0.1, 0.1]] + [1.5 * x for x in [0.3, 0.0, 0.2, 0.2]]
    assert sum(d) / 12 == pytest.approx(0.15)
    low, high = _sign_flip_interval(d, 32, seed=3)
    assert (c["low"], c["high"]) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    assert math.isfinite(c["low"]) and c["low"] < 0.15 < c["high"]
    rows = list(csv.DictReader(io.StringIO(to_csv(result))))
    last = rows[-1]
    assert (last["collection"], last["retriever"], last["experiments"]) == ("average", "cand", "a1 a2 b1 b2")
    assert float(last["difference"]) == pytest.approx(0.15, abs=1e-6)


def test_one_collection_has_no_average_row_and_a_single_seed_no_sd():
    inputs = _inputs()
    inputs["experiments"] = inputs["experiments"][:1]
    result = build(inputs, "base", permutations=P, seed=3)
    assert result["rows"] == ["A"] and result["family_size"] == 1
    assert result["table"][M]["A"]["cand"]["sd"] is None
    # one seed: d = CAND_A1 - BASE_A = [.3, .2, .1, .1, .2, .1, .1, .1], mean 1.2 / 8 = 0.15
    assert result["table"][M]["A"]["cand"]["comparison"]["difference"] == pytest.approx(0.15)


@pytest.mark.parametrize("changes, message", [
    ({"a2": {"runs": {"base": {f"q{i}": {M: v} for i, v in enumerate(BASE_A)}}}},
     "experiment 'a2' has no run 'cand'"),
    ({"a2": {"runs": {"base": {f"q{i}": {M: v} for i, v in enumerate(BASE_A)},
                      "cand": {f"q{i + 1}": {M: v} for i, v in enumerate(CAND_A2)}}}},
     ("experiment 'a2' run 'cand' was evaluated on other queries than experiment 'a1' run 'base' (8 vs 8; "
      "2 in only one, e.g. 'q0')")),
    ({"b2": {"params": {"dataset": "B", "train.seed": 2, "x": 2}}},
     "experiments 'b1' and 'b2' both measure 'B' but differ in x: only train.seed may differ"),
])
def test_inconsistent_experiments_are_refused_naming_the_experiment_and_file(changes, message):
    with pytest.raises(InputError) as info:
        build(_inputs(**changes), "base", permutations=P)
    assert message in str(info.value)
    if "run 'cand'" in message:
        assert "reports/A/cand/per_query.json" in str(info.value)


# ----------------------------------------------------------------------------- DVC experiments

STAGE = """import json, os, yaml
p = yaml.safe_load(open("params.yaml"))
s = p["train"]["seed"]
for run, values in {"dense": [0.5, 0.5, 0.5], "bm25": [0.1 * s, 0.2 * s, 0.3 * s]}.items():
    os.makedirs(f"reports/c1/{run}", exist_ok=True)
    with open(f"reports/c1/{run}/per_query.json", "w") as f:
        json.dump({"queries": {f"q{i}": {"measures": {"nDCG@10": v}} for i, v in enumerate(values)}}, f)
"""
DVC_YAML = """stages:
  make:
    cmd: python make.py
    deps: [make.py]
    params: [dataset, train.seed]
    outs: [reports/c1/dense/per_query.json, reports/c1/bm25/per_query.json]
"""


@pytest.fixture(scope="module")
def exp_repo(tmp_path_factory) -> Path:
    """A git + DVC repository with two experiments (train.seed 1 and 2) of one trivial stage; the
    workspace's outputs removed afterwards, so that only the refs and the cache hold them."""
    repo = new_dvc_repo(tmp_path_factory.mktemp("exps"), {"params.yaml": "dataset: c1\ntrain:\n  seed: 0\n",
                                                          "make.py": STAGE, "dvc.yaml": DVC_YAML})
    for seed in (1, 2):
        sh(repo, DVC, "exp", "run", "-q", "-n", f"s{seed}", "-S", f"train.seed={seed}")
    sh(repo, "git", "checkout", "-q", "--", ".")
    sh(repo, "rm", "-rf", "reports")
    return repo


def test_experiments_are_read_from_their_refs_and_the_cache_without_checkout(exp_repo, tmp_path):
    head = sh(exp_repo, "git", "rev-parse", "HEAD").strip()
    refs = dict(line.split()[::-1] for line in sh(exp_repo, "git", "for-each-ref", "--format=%(objectname) "
                                                   "%(refname)", "refs/exps").splitlines())
    commits = {ref.rsplit("/", 1)[1]: sha for ref, sha in refs.items()}
    params = tmp_path / "params.yaml"
    params.write_text(f"evaluate: {{permutations: {P}, seed: 3}}\ncompare: {{key_measures: []}}\n")
    out = {k: tmp_path / f"table.{k}" for k in ("md", "csv", "png", "json")}
    code = run_command("table", ["--repo", str(exp_repo), "--experiments", "s1", "s2", "--runs", "dense", "bm25",
                                 "--baseline", "dense", "--markdown", str(out["md"]), "--csv", str(out["csv"]),
                                 "--plot", str(out["png"]), "--inputs", str(out["json"]), "--params", str(params)])
    assert code == 0
    assert sh(exp_repo, "git", "rev-parse", "HEAD").strip() == head and not (exp_repo / "reports").exists()
    rows = {(r["measure"], r["retriever"]): r for r in csv.DictReader(out["csv"].open())}
    # bm25: seed 1 [.1, .2, .3] mean 0.2, seed 2 [.2, .4, .6] mean 0.4 -> 0.3 ± 0.2 / sqrt(2) = 0.141421;
    # against dense (0.5 on each query): averaged over seeds [.15, .3, .45] - .5 = [-.35, -.2, -.05], mean -0.2
    bm25 = rows[(M, "bm25")]
    assert float(bm25["mean"]) == pytest.approx(0.3, abs=1e-6)
    assert float(bm25["sd"]) == pytest.approx(0.141421, abs=1e-6)
    assert float(bm25["difference"]) == pytest.approx(-0.2, abs=1e-6)
    # 3 queries: a one-sign vector is 1/4 of the draws, no finite interval at 95%
    assert bm25["low"] == "-inf" or float(bm25["low"]) == -math.inf
    text = out["md"].read_text()
    # each experiment's own commit, and in brackets the commit it was run on
    assert f"| c1 | s1 | {commits['s1'][:7]} ({head[:7]}) | train.seed=1 |" in text
    assert f"| c1 | s2 | {commits['s2'][:7]} ({head[:7]}) | train.seed=2 |" in text
    assert out["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the inputs file renders the same table again
    again = tmp_path / "again.md"
    assert run_command("table", ["--from-inputs", str(out["json"]), "--baseline", "dense", "--markdown", str(again),
                                 "--csv", str(tmp_path / "again.csv"), "--params", str(params)]) == 0
    assert again.read_text() == text


def test_a_missing_experiment_or_file_is_one_line_naming_both(exp_repo, tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text("compare: {key_measures: []}\n")
    args = ["--repo", str(exp_repo), "--markdown", str(tmp_path / "t.md"), "--csv", str(tmp_path / "t.csv"),
            "--baseline", "dense", "--params", str(params)]
    assert run_command("table", [*args, "--experiments", "s1", "nope", "--runs", "dense", "bm25"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "experiment 'nope' not found" in err
    assert run_command("table", [*args, "--experiments", "s1", "--runs", "dense", "lsa"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "experiment 's1' has no reports/c1/lsa/per_query.json" in err
    assert not (tmp_path / "t.md").exists()


def test_an_experiment_s_params_are_read_as_params_are():
    # DVC writes `-S train.lr=5e-5` as `5e-05`: a number, as load_params reads it, not YAML 1.1's string
    assert experiment_params(lambda path: "train:\n  lr: 5e-05\n", "x") == {"train.lr": 5e-05}
    with pytest.raises(InputError, match="experiment 'x': invalid YAML"):
        experiment_params(lambda path: "train: [\n", "x")
    with pytest.raises(InputError, match="experiment 'x': invalid YAML .*duplicate key 'a'"):
        experiment_params(lambda path: "a: 1\na: 2\n", "x")


def test_gather_reads_the_workspace_too(exp_repo):
    with pytest.raises(InputError, match="experiment 'workspace' has no reports/c1/dense/per_query.json"):
        gather(exp_repo, ["workspace"], ["dense"], [M])


# ----------------------------------------------------------------------------- the queued sweep

QUEUE_STAGE = STAGE.replace('p = yaml.safe_load(open("params.yaml"))',
                            'p = yaml.safe_load(open("params.yaml"))\nopen("data/raw/ext/values.txt").read()')
QUEUE_YAML = DVC_YAML.replace("deps: [make.py]", "deps: [make.py, data/raw/ext]")


def test_a_queued_seed_sweep_reaches_data_beside_the_repository_and_makes_one_table(tmp_path):
    """The README recipe on a trivial stage: data reached by a relative link to a folder beside the
    repository (as data/raw/scifact), three seeds queued, two workers, then exp show and the table."""
    repo = tmp_path / "repo"
    (tmp_path / "shared" / "ext").mkdir(parents=True)
    (tmp_path / "shared" / "ext" / "values.txt").write_text("x\n")
    (repo / "data" / "raw").mkdir(parents=True)
    (repo / "data" / "raw" / "ext").symlink_to("../../../shared/ext")
    new_dvc_repo(repo, {"params.yaml": "dataset: c1\ntrain:\n  seed: 0\n", "make.py": QUEUE_STAGE,
                        "dvc.yaml": QUEUE_YAML})
    # a queued experiment runs in .dvc/tmp/exps/<tmp>/, where ../../../shared is .dvc/tmp/exps/shared
    bad = subprocess.run([DVC, "exp", "run", "--temp", "-n", "broken"], cwd=repo, capture_output=True, text=True,
                         env=git_env(), timeout=120, check=False)
    assert bad.returncode != 0 and "data/raw/ext" in bad.stdout + bad.stderr
    # the recipe's setup line: ../../../shared from any temp workspace is the repository's ../shared
    sh(repo, "mkdir", "-p", ".dvc/tmp/exps")
    sh(repo, "ln", "-sfn", "../../../../shared", ".dvc/tmp/exps/shared")
    for seed in (1, 2, 3):
        sh(repo, DVC, "exp", "run", "--queue", "-n", f"seed{seed}", "-S", f"train.seed={seed}")
    # the workers it starts are daemons that inherit its stdout/stderr: a captured pipe stays open until the last
    # task ends, which on a loaded machine outlasts any timeout. Their output goes to a file instead.
    with (tmp_path / "queue-start.log").open("w") as log:
        started = subprocess.run([DVC, "queue", "start", "-j", "2"], cwd=repo, stdout=log, stderr=log, timeout=120,
                                 env=git_env(), check=False)
    assert started.returncode == 0, (tmp_path / "queue-start.log").read_text()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        status = sh(repo, DVC, "queue", "status")
        if not any(word in status for word in ("Queued", "Running")):
            break
        time.sleep(0.5)
    assert status.count("Success") == 3, status
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # a task can report Success a moment before its experiment's ref is collected
        shown = sh(repo, DVC, "exp", "show", "--csv", "--only-changed")
        if all(f"seed{s}" in shown for s in (1, 2, 3)):
            break
        time.sleep(0.5)
    assert all(f"seed{s}" in shown for s in (1, 2, 3)), shown
    params = tmp_path / "params.yaml"
    params.write_text("compare: {key_measures: []}\n")
    out = tmp_path / "t.csv"
    assert run_command("table", ["--repo", str(repo), "--experiments", "seed1", "seed2", "seed3", "--runs", "dense",
                                 "bm25", "--baseline", "dense", "--markdown", str(tmp_path / "t.md"), "--csv",
                                 str(out), "--params", str(params)]) == 0
    bm25 = next(r for r in csv.DictReader(out.open()) if r["retriever"] == "bm25")
    # seed s: [.1 s, .2 s, .3 s], mean 0.2 s: 0.2, 0.4, 0.6 -> mean 0.4, sd 0.2
    assert (bm25["seeds"], float(bm25["mean"]), float(bm25["sd"])) == ("3", pytest.approx(0.4), pytest.approx(0.2))


# ----------------------------------------------------------------------------- the committed worked example

REPO_ROOT = Path(__file__).resolve().parents[1]
MODULE = "retrieval_lab.publishing.experiments"


def _script(*args: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, "-m", MODULE, *args], capture_output=True, text=True, env=env, timeout=300,
                          check=False)


def test_the_committed_worked_example_is_what_its_inputs_render():
    result = _script("--check")
    assert result.returncode == 0, result.stderr


def test_the_check_fails_on_a_stale_table(tmp_path):
    inputs = _inputs()
    inputs["runs"] = ["dense", "bm25"]
    for e in inputs["experiments"]:
        e["runs"] = {"dense": e["runs"]["base"], "bm25": e["runs"]["cand"]}
        e["baseline"] = e["commit"]
    (tmp_path / "inputs.json").write_text(json.dumps(inputs))
    assert _script("--folder", str(tmp_path), "--check").returncode == 1  # no table yet
    params = REPO_ROOT / "params.yaml"
    assert run_command("table", ["--from-inputs", str(tmp_path / "inputs.json"), "--baseline", "dense", "--params",
                                 str(params), "--markdown", str(tmp_path / "table.md"),
                                 "--csv", str(tmp_path / "table.csv")]) == 0
    assert _script("--folder", str(tmp_path), "--check").returncode == 0
    # one unit of the last printed digit is another CPU's rounding, not a stale table
    rendered = (tmp_path / "table.csv").read_text()
    assert "0.625000" in rendered
    (tmp_path / "table.csv").write_text(rendered.replace("0.625000", "0.625001"))
    assert _script("--folder", str(tmp_path), "--check").returncode == 0
    (tmp_path / "table.csv").write_text(rendered.replace("0.625", "0.626"))
    stale = _script("--folder", str(tmp_path), "--check")
    assert stale.returncode == 1 and f"{tmp_path / 'table.csv'} differs" in stale.stderr
    assert "table.md" not in stale.stderr


@pytest.mark.parametrize(("edit", "field", "said"), [
    (lambda i: {}, "runs", "missing field"),
    (lambda i: [], "", "expected an object, got list"),
    (lambda i: {**i, "measures": "nDCG@10"}, "measures", "expected a list, got str"),
    (lambda i: {**i, "experiments": [{**i["experiments"][0], "params": {}}]}, "experiments[0].params.dataset",
     "missing field"),
    (lambda i: {**i, "experiments": [{**i["experiments"][0], "runs": {"base": {"q1": {M: "0.5"}}}}]},
     f"experiments[0].runs.base.q1.{M}", "expected a number, got str"),
    (lambda i: {**i, "experiments": [{**i["experiments"][0], "runs": {"base": {"q1": {}}}}]},
     f"experiments[0].runs.base.q1.{M}", "missing field"),
])
def test_inputs_that_are_not_what_inputs_writes_are_refused_by_field(tmp_path, capsys, edit, field, said):
    path = tmp_path / "inputs.json"
    path.write_text(json.dumps(edit(_inputs())))
    assert run_command("table", ["--from-inputs", str(path), "--baseline", "base", "--markdown",
                                 str(tmp_path / "t.md"), "--csv", str(tmp_path / "t.csv")]) == 2
    err = capsys.readouterr().err
    assert not (tmp_path / "t.md").exists() and not (tmp_path / "t.csv").exists()
    assert err.startswith(f"error: {path}") and said in err and "Traceback" not in err
    assert (f"field '{field}'" in err) if field else ("field" not in err)
