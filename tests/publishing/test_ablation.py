"""retrieval_lab.publishing.ablation (scripts/ablation_table.py): levers read from DVC experiments without checkout, their changes, validation curves
and one family of comparisons against the baseline; bench_report renders the folder; bad input is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dvc_repos import DVC, new_dvc_repo, sh

from retrieval_lab.publishing import ablation as ablation_module
from retrieval_lab.publishing import benchmarks

# q0, q1 seen, q2, q3 unseen. dense: 0.5 on each (0.5 + base_shift on q3). A lever with train.lr = s scores
# [0.5 + .1 s, 0.5 + .1 s, 0.5, 0.5 + .1 s]: s = 1 -> all 0.575, seen 0.6, unseen 0.55 (+0.05 over dense);
# s = 2 -> all 0.65, seen 0.7, unseen 0.6 (+0.1). Validation: 0.4 at step 0, 0.4 + .01 s at step 10 (kept).
STAGE = """import json, os, yaml
p = yaml.safe_load(open("params.yaml"))
s, shift = p["train"]["lr"], p["base_shift"]
seen = [True, True, False, False]
for run, values in {"dense": [0.5, 0.5, 0.5, 0.5 + shift],
                    "dense-ft-hard": [0.5 + .1 * s, 0.5 + .1 * s, 0.5, 0.5 + .1 * s]}.items():
    os.makedirs(f"reports/c1/{run}", exist_ok=True)
    with open(f"reports/c1/{run}/per_query.json", "w") as f:
        json.dump({"queries": {f"q{i}": {"measures": {"nDCG@10": v}, "seen": seen[i]}
                               for i, v in enumerate(values)}}, f)
os.makedirs("dvclive/c1/hard/plots/metrics/val", exist_ok=True)
with open("dvclive/c1/hard/plots/metrics/val/nDCG@10.tsv", "w") as f:
    f.write(f"step\\tnDCG@10\\n0\\t0.4\\n10\\t{0.4 + .01 * s}\\n")
with open("dvclive/c1/hard/metrics.json", "w") as f:
    json.dump({"selected": {"step": 10}}, f)
"""
DVC_YAML = """stages:
  make:
    cmd: python make.py
    deps: [make.py]
    params: [dataset, base_shift, train.lr]
    outs: [reports/c1/dense/per_query.json, reports/c1/dense-ft-hard/per_query.json]
    metrics: [dvclive/c1/hard/metrics.json: {cache: false}]
    plots: [dvclive/c1/hard/plots: {cache: false}]
"""


@pytest.fixture(scope="module")
def ablation():
    return ablation_module


@pytest.fixture(scope="module")
def report():
    return benchmarks


@pytest.fixture(scope="module")
def lever_repo(tmp_path_factory) -> Path:
    """Experiments a (train.lr 1), b (train.lr 2) and shifted (train.lr 1, another dense run); the workspace's
    outputs removed, so that only the refs and the DVC cache hold them."""
    repo = new_dvc_repo(tmp_path_factory.mktemp("levers"), {
        "params.yaml": "dataset: c1\nbase_shift: 0.0\ntrain:\n  lr: 0\n  select_measure: nDCG@10\n",
        "make.py": STAGE, "dvc.yaml": DVC_YAML})
    for name, sets in {"a": ["train.lr=1"], "b": ["train.lr=2"], "shifted": ["train.lr=1", "base_shift=0.1"]}.items():
        sh(repo, DVC, "exp", "run", "-q", "-n", name, *[x for s in sets for x in ("-S", s)])
        sh(repo, "git", "checkout", "-q", "--", ".")
    sh(repo, "rm", "-rf", "reports", "dvclive")
    return repo


def test_levers_their_changes_curves_and_one_family_of_comparisons(ablation, report, lever_repo, tmp_path):
    out = tmp_path / "ablation"
    assert ablation.main(["--repo", str(lever_repo), "--output", str(out), "a=a", "b=b"]) == 0
    assert not (lever_repo / "reports").exists()  # read from the refs and the cache, nothing checked out
    levers = json.loads((out / "levers.json").read_text())
    assert levers["baseline"] == "dense"
    a, b = levers["levers"]
    assert (a["name"], a["run"], a["changes"]) == ("a", "dense-ft-hard", {})  # the reference
    assert b["changes"] == {"train.lr": 2}
    assert b["validation"] == [[0, 0.4], [10, pytest.approx(0.42)]] and b["selected_step"] == 10
    result = json.loads((out / "compare.json").read_text())
    assert result["family_size"] == 6  # 2 levers x (all, seen, unseen)
    pa, pb = result["pairs"]["dense vs a"], result["pairs"]["dense vs b"]
    assert pa["candidate_mean"] == pytest.approx(0.575) and pb["candidate_mean"] == pytest.approx(0.65)
    assert pa["strata"]["unseen"]["mean_difference"] == pytest.approx(0.05)
    assert pb["strata"]["seen"]["candidate_mean"] == pytest.approx(0.7)
    assert pb["strata"]["unseen"]["mean_difference"] == pytest.approx(0.1)
    assert "| dense | b | 2 unseen | 0.5000 | 0.6000 | +0.1000 |" in (out / "compare.md").read_text()
    lines = report.ablation_section(out)
    text = "\n".join(lines)
    assert "| `dense` (untrained) | - | - | 0.5000 | 0.5000 | 0.5000 | - |" in text
    unseen = pb["strata"]["unseen"]
    assert (f"| `b` | `train.lr=2` | 0.4000 → **0.4200** | 0.6500 | 0.7000 | 0.6000 | +0.1000 "
            f"[{unseen['ci_low']:+.4f}, {unseen['ci_high']:+.4f}] |") in text
    assert "6 comparisons" in text and "### Paired comparison on nDCG@10" in text
    # a lever measured on another variant's run says so beside its name (its params alone would not)
    b["run"] = "dense-ft-random"
    (out / "levers.json").write_text(json.dumps({"baseline": "dense", "levers": [a, b]}))
    assert "| `b` (run `dense-ft-random`) | `train.lr=2` |" in "\n".join(report.ablation_section(out))


def test_levers_with_different_baselines_or_bad_specs_are_refused(ablation, lever_repo, tmp_path, capsys):
    out = tmp_path / "ablation"
    assert ablation.main(["--repo", str(lever_repo), "--output", str(out), "a=a", "shifted=shifted"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lever 'shifted': its dense run differs from the first lever's" in err
    assert "shifted:reports/c1/dense/per_query.json" in err
    assert ablation.main(["--repo", str(lever_repo), "--output", str(out), "a=a", "b=b:bm25"]) == 2
    assert "'bm25' is no fine-tuned run" in capsys.readouterr().err
    assert ablation.main(["--repo", str(lever_repo), "--output", str(out), "a=a", "a=b"]) == 2
    assert "lever names must be unique" in capsys.readouterr().err
    assert ablation.main(["--repo", str(lever_repo), "--output", str(out), "a=a", "c=nope"]) == 2
    assert "experiment 'nope' not found" in capsys.readouterr().err
    assert not out.exists()  # nothing written by a refused call


def test_bench_report_renders_each_ablation_folder_as_its_own_family(ablation, report, lever_repo, tmp_path):
    # levers gathered apart (another day, another baseline) keep their own family: 2 levers x 3 strata = 6, 1 x 3 = 3
    first, second = tmp_path / "first", tmp_path / "second"
    assert ablation.main(["--repo", str(lever_repo), "--output", str(first), "a=a", "b=b"]) == 0
    assert ablation.main(["--repo", str(lever_repo), "--output", str(second), "b=b"]) == 0
    page = tmp_path / "page.md"
    assert report.main(["--skip-run", "--results-dir", str(tmp_path / "results"), "--output", str(page),
                        "--scifact-ablation", str(first), str(second)]) == 0
    text = page.read_text()
    one, two = f"## SciFact ablation: one change at a time (`{first}`)", f"(`{second}`)"
    assert text.index(one) < text.index(two)
    assert "(6 comparisons)" in text.split(two)[0] and "(3 comparisons)" in text.split(two)[1]


def test_bench_report_refuses_an_ablation_folder_without_its_files(report, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        report.main(["--skip-run", "--scifact-ablation", str(tmp_path), "--output", str(tmp_path / "page.md")])
    assert info.value.code == 2 and "no levers.json or compare.json" in capsys.readouterr().err
    assert not (tmp_path / "page.md").exists()


@pytest.mark.parametrize("files, said", [
    ({"params.yaml": "train: {lr: 1}\n"}, "params.yaml field 'dataset': experiment 'x': params.yaml names no dataset"),
    ({"params.yaml": "dataset: c1\n", "dvclive/c1/hard/plots/metrics/val/nDCG@10.tsv": "step\tnDCG@10\n0\t0.4\n",
      "dvclive/c1/hard/metrics.json": "{}"}, "x:dvclive/c1/hard/metrics.json: not a training's dvclive metrics"),
    ({"params.yaml": "dataset: c1\n", "dvclive/c1/hard/plots/metrics/val/nDCG@10.tsv": "step\tnDCG@10\n0\t0.4\n",
      "dvclive/c1/hard/metrics.json": '{"selected": {"step": 0}}', "reports/c1/dense/per_query.json": "[]"},
     "x:reports/c1/dense/per_query.json: not an evaluate per_query.json"),
])
def test_an_experiment_missing_what_a_lever_needs_is_one_line(ablation, monkeypatch, tmp_path, capsys, files, said):
    def reader(path):
        if path not in files:
            raise FileNotFoundError(path)
        return files[path]

    monkeypatch.setattr(ablation, "open_experiment", lambda repo, spec: ("x", "0" * 40, "0" * 40, reader))
    assert ablation.main(["--repo", str(tmp_path), "--output", str(tmp_path / "out"), "a=x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err and not (tmp_path / "out").exists()


def test_the_output_folder_replaces_only_what_the_script_wrote(ablation, lever_repo, tmp_path, capsys):
    out = tmp_path / "ablation"
    assert ablation.main(["--repo", str(lever_repo), "--output", str(out), "a=a"]) == 0
    assert json.loads((out / "compare.json").read_text())["family_size"] == 3  # 1 lever x (all, seen, unseen)
    # its own folder is replaced whole: a second gathering leaves no trace of the first
    assert ablation.main(["--repo", str(lever_repo), "--output", str(out), "a=a", "b=b"]) == 0
    assert json.loads((out / "compare.json").read_text())["family_size"] == 6
    # a folder holding someone's files, or a file, is refused in one line; nothing in it changes
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "compare.md").write_text("my notes\n")
    assert ablation.main(["--repo", str(lever_repo), "--output", str(mine), "a=a"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did not write" in err and str(mine) in err
    assert sorted(p.name for p in mine.iterdir()) == ["compare.md"] and (mine / "compare.md").read_text() == "my notes\n"
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert ablation.main(["--repo", str(lever_repo), "--output", str(afile), "a=a"]) == 2
    assert "is a file" in capsys.readouterr().err and afile.read_text() == "x"
