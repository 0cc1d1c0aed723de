"""The pipeline's lists come from params.yaml: adding a training variant, a dense model or a fusion method is
one edit there, then ``retrieval-lab names``. DVC generates the stages (``foreach`` over the names block that
command writes from ``train.variants``, ``dense.models``, ``fusion.methods``); the lists DVC cannot generate (the top-level ``plots:``, bench_report's run list) are
checked here against params. Stages are resolved by DVC itself in scratch copies; nothing is trained.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
from pathlib import Path

import yaml
from beir_fixtures import REPO, write_beir
from pipeline_fixtures import write_names

from retrieval_lab import fusion

DVC = str(Path(__import__("sys").executable).with_name("dvc"))


def _copy(root: Path) -> Path:
    """dvc.yaml, params.yaml, the sources and the base lock in a scratch DVC project (no git)."""
    from dvc.repo import Repo

    Repo.init(str(root), no_scm=True).close()
    for name in ("dvc.yaml", "params.yaml", "models/base.lock.json"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, root / name)
    shutil.copytree(REPO / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _stages(root: Path) -> dict[str, dict]:
    """stage name -> its resolved command, dependencies, params and outputs."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        return {s.name: {"cmd": s.cmd, "deps": sorted(str(d.def_path) for d in s.deps if not hasattr(d, "params")),
                         "params": sorted(p for d in s.deps if hasattr(d, "params") for p in d.params or []),
                         "outs": sorted(str(o.def_path) for o in s.outs)} for s in repo.index.stages}


def _edit_params(root: Path, edit) -> None:
    path = root / "params.yaml"
    params = yaml.safe_load(path.read_text(encoding="utf-8"))
    edit(params)
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    write_names(root)  # dvc.yaml's names follow params.yaml (retrieval-lab names)


def _params() -> dict:
    return yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))


def run_names(params: dict) -> list[str]:
    """The runs params.yaml asks for: lexical, each dense model, each fine-tuned variant, each fusion, each of
    your own retrievers (external)."""
    return ["bm25", "lsa", *params["dense"]["models"], *(f"dense-ft-{v}" for v in params["train"]["variants"]),
            *(f"fused-{m}" for m in params["fusion"]["methods"]), *params.get("external", {})]


def test_the_pipeline_makes_one_run_per_name_params_asks_for():
    stages = _stages(REPO)
    dataset = _params()["dataset"]
    runs = sorted(Path(o).stem for s in stages.values() for o in s["outs"] if o.startswith(f"runs/{dataset}/"))
    assert runs == sorted(run_names(_params()))
    assert {f"evaluate@{n}" for n in ("bm25", "lsa")} | {"evaluate-dense@dense", "evaluate-ft@query"} <= set(stages)


def test_a_new_training_variant_gets_its_stages_and_leaves_the_others_alone(tmp_path):
    root = _copy(tmp_path)
    before = _stages(root)
    _edit_params(root, lambda p: p["train"]["variants"].update(warm={"negatives": "hard", "temperature": 0.2}))
    after = _stages(root)
    assert set(after) - set(before) == {"train@warm", "retrieve-ft@warm", "evaluate-ft@warm"}
    assert {name: after[name] for name in before} == before  # no existing stage reads another variant's params
    assert "--embeddings data/embeddings/dense-ft-warm/support" in after["retrieve-ft@warm"]["cmd"]
    assert "runs/support/dense-ft-warm.trec" in after["evaluate-ft@warm"]["deps"]
    assert "train.variants.warm" in after["train@warm"]["params"]


def test_fusion_methods_come_from_params_and_name_registered_methods(tmp_path):
    assert set(_params()["fusion"]["methods"]) <= set(fusion.METHODS)
    root = _copy(tmp_path)
    _edit_params(root, lambda p: p["fusion"]["methods"].pop("weighted"))
    stages = _stages(root)
    assert not {n for n in stages if n.endswith("@weighted")}
    assert stages["fuse@rrf"]["params"] == ["fusion.dense", "fusion.depth", "fusion.methods.rrf", "fusion.tune",
                                            "fusion.tune_measure"]


def _placeholders(root: Path, stages: dict[str, dict]) -> None:
    """Stand-in outputs for every stage: what `dvc commit` records so the lock says all is up to date."""
    for stage in stages.values():
        for out in stage["outs"]:
            path = root / out
            if path.suffix:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f"stand-in for {out}\n", encoding="utf-8")
            else:
                path.mkdir(parents=True, exist_ok=True)
                (path / "stand-in.txt").write_text(out, encoding="utf-8")
    for stage in stages.values():  # files inside an output folder that a later stage names
        for dep in stage["deps"]:
            if not (root / dep).exists():
                (root / dep).parent.mkdir(parents=True, exist_ok=True)
                (root / dep).write_text(f"stand-in for {dep}\n", encoding="utf-8")


def _tiny_bert(folder: Path) -> Path:
    """A randomly initialised BERT with its own vocabulary, in the Hugging Face folder form."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "vpn", "password", "reset", "printer", "jam"]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    config = BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=512)
    BertModel(config).save_pretrained(folder)
    return folder


def test_a_second_model_reruns_only_its_own_stages(tmp_path):
    root = _copy(tmp_path / "pipeline")
    _placeholders(root, _stages(root))
    subprocess.run([DVC, "commit", "-f", "-q"], cwd=root, check=True, capture_output=True)
    status = lambda: json.loads(subprocess.run([DVC, "status", "--json"], cwd=root, check=True,
                                               capture_output=True, text=True).stdout or "{}")
    assert status() == {}
    _tiny_bert(root / "models" / "tiny")
    _edit_params(root, lambda p: p["dense"]["models"].update(tiny="models/tiny"))
    # names: it reads dense.models whole, checks the names and feeds nothing
    assert set(status()) == {"names", "encode@tiny", "retrieve-dense@tiny", "evaluate-dense@tiny"}
    stages = _stages(root)
    assert "models/tiny" in stages["encode@tiny"]["deps"]
    assert stages["retrieve-dense@tiny"]["outs"] == ["runs/support/tiny.trec"]  # its timing: latency/, no output
    assert "--timing latency/support/tiny.json" in stages["retrieve-dense@tiny"]["cmd"]
    assert stages["encode@tiny"]["outs"] == ["data/embeddings/tiny/support"]  # cached apart from dense's


def test_the_tiny_model_folder_encodes(tmp_path, monkeypatch):
    # the folder form the stage above passes to `encode --model`
    from retrieval_lab import cli
    from retrieval_lab.encoder import load_embeddings

    model = _tiny_bert(tmp_path / "tiny")
    beir = write_beir(tmp_path / "beir", [{"_id": "d1", "title": "vpn", "text": "password reset"},
                                          {"_id": "d2", "title": "printer", "text": "jam"}],
                      [{"_id": "q1", "text": "vpn password"}], {"test": [("q1", "d1", 1)]})
    monkeypatch.chdir(tmp_path)
    assert cli.main(["encode", "--dataset", str(beir), "--model", str(model), "--output", "emb"]) == 0
    embeddings = load_embeddings(tmp_path / "emb")
    assert embeddings.doc_embeddings.shape == (2, 8) and embeddings.report["model"]["model_dir"] == str(model)


def _plot_files(plot: dict) -> set[str]:
    (spec,) = plot.values()
    return set(spec["y"]) if isinstance(spec.get("y"), dict) else set()


def test_the_plots_name_every_run_and_variant_params_declares():
    # dvc.yaml's top-level plots cannot foreach: they are checked against params here
    pipeline = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))
    plots = {next(iter(p)): p for p in pipeline["plots"]}
    params = _params()
    assert _plot_files(plots["recall_at_k"]) == {f"reports/${{names.dataset}}/{r}/recall_curve.csv"
                                                  for r in run_names(params)}
    for name, tsv in [("training_loss", "train/loss.tsv"), ("validation_ndcg", "val/nDCG@10.tsv")]:
        assert _plot_files(plots[name]) == {f"dvclive/${{names.dataset}}/{v}/plots/metrics/{tsv}"
                                            for v in params["train"]["variants"]}
    hists = [p for p in plots if p.endswith("first_positive_hist.csv")]
    assert hists and {Path(p).parent.name for p in hists} <= set(run_names(params))


def test_bench_report_describes_every_run_of_the_pipeline():
    # read, not imported: its run list is a literal mapping run -> description
    tree = ast.parse((REPO / "src" / "retrieval_lab" / "publishing" / "benchmarks.py").read_text(encoding="utf-8"))
    (described,) = [node.value for node in tree.body if isinstance(node, ast.Assign)
                    and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["SCIFACT_RUNS"]]
    assert [key.value for key in described.keys] == run_names(_params())
