"""One training run, top to bottom: :func:`fine_tune` (see the package docstring for what is reproducible)."""

from __future__ import annotations

import contextlib
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..core.errors import InputError
from ..core.params import TrainParams
from ..distributed import (
    SINGLE_PROCESS,
    Distributed,
    barrier,
    broadcast_module,
    distributed_model,
    gather,
    shard,
)
from ..encoder import require_native_bf16
from .batching import Batch, batches_per_epoch, epoch_batches, make_batch
from .checkpoint import FORMAT, load_checkpoint, rng_state, save_checkpoint, set_rng_state
from .data import TrainingData
from .spec import TrainSpec

NO_DECAY = ("bias", "LayerNorm.weight", "LayerNorm.bias")  # the usual BERT convention


@dataclass(frozen=True)
class LoopOptions:
    """How :func:`fine_tune` runs; what it trains is ``spec`` and ``data``.

    ``fingerprint``: written into checkpoints; a ``resume`` checkpoint must match it.
    ``stop_after``: stop once the global step reaches it, saving ``checkpoint``.
    ``resume``: continue from a checkpoint (refused if its fingerprint differs).
    ``checkpoint``: also written at every epoch end. ``validate(encoder) -> metrics``
    runs on rank 0 before training, every ``validate_every`` steps (0: each epoch
    end) and at the last step; with ``train.select == "best"`` the weights of the
    validation best on ``train.select_measure`` are the ones returned (step 0, the
    untrained model, included), and ``train.patience`` validations without
    improvement end the run.
    """

    fingerprint: dict
    stop_after: int | None = None
    resume: str | Path | None = None
    checkpoint: str | Path | None = None
    validate: Callable[[object], dict] | None = None
    dist_info: Distributed = SINGLE_PROCESS
    progress: bool = True


@dataclass
class TrainResult:
    steps: int
    total_steps: int
    history: list[dict]  # one per step: step, epoch, loss, lr, query_ids
    validation: list[dict] = field(default_factory=list)  # step, metrics
    stopped_early: bool = False  # by --stop-after: only a checkpoint, no model
    seconds: float = 0.0
    selected_step: int | None = None  # the step whose weights the model holds (None: the last one)
    patience_stop: bool = False  # ended by train.patience before the planned steps


@dataclass
class _Progress:
    """Where the run stands: what a checkpoint saves beside the weights and optimizer."""

    step: int = 0
    epoch: int = 0
    position: int = 0  # batches of this epoch already done
    history: list[dict] = field(default_factory=list)
    validation: list[dict] = field(default_factory=list)
    best: dict = field(default_factory=dict)  # step, value, state (CPU copies of the weights)
    since_best: int = 0  # validations since the best one


# ----------------------------------------------------------------------------- the run


def fine_tune(encoder, data: TrainingData, spec: TrainSpec, options: LoopOptions) -> TrainResult:
    """Train ``encoder`` in place: seed, build optimizer and schedule, maybe resume, loop, return the history."""
    params = spec.train
    if params.bf16:
        require_native_bf16(encoder.device, "train.bf16")
    if spec.query_side != (data.doc_matrix is not None):
        raise ValueError(f"variant {spec.name!r} trains {'the query side' if spec.query_side else 'both sides'} "
                         f"but the data {'lacks' if spec.query_side else 'holds'} frozen documents "
                         "(with_frozen_documents)")
    with _deterministic(encoder.device):
        started = time.perf_counter()
        random.seed(params.seed)
        np.random.seed(params.seed)
        torch.manual_seed(params.seed)
        dist_info = options.dist_info
        model = encoder.model
        if params.freeze_word_embeddings:
            model.get_input_embeddings().weight.requires_grad_(False)
        optimizer = _optimizer(model, params)
        _, total = total_steps(params, len(data.examples), dist_info.world)
        scheduler = _schedule(optimizer, params, total)
        run = _Progress()
        resumed = options.resume is not None
        if resumed:
            _resume(options, model, optimizer, scheduler, run)
        stop_after = options.stop_after
        if stop_after is not None and run.step >= stop_after:
            raise InputError(f"the run is already at step {run.step}; --stop-after must be larger",
                             field="--stop-after")
        _check_selection(params, options)
        if run.step == 0:
            _validate(encoder, model, run, options, params)
        bar = None
        if options.progress and dist_info.main:
            from tqdm import tqdm

            bar = tqdm(total=total, initial=run.step, desc="train", unit="step", dynamic_ncols=True)
        model.train()
        stopped = patience_stop = False
        with distributed_model(encoder, dist_info):
            while run.step < total and not stopped and not patience_stop:
                batches = epoch_batches(len(data.examples), params.batch_size, params.seed, run.epoch,
                                        dist_info.world)
                if resumed:
                    _check_order(batches, data, run, options.resume)
                    resumed = False
                while run.position < len(batches) and run.step < total:
                    batch = make_batch([data.examples[i] for i in batches[run.position]], data.relevant)
                    lr = scheduler.get_last_lr()[0]
                    loss = train_step(encoder, batch, data, spec, dist_info)
                    if params.max_grad_norm is not None:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), params.max_grad_norm)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad(set_to_none=True)
                    run.step += 1
                    run.position += 1
                    run.history.append({"step": run.step, "epoch": run.epoch, "loss": loss.item(), "lr": lr,
                                        "query_ids": batch.query_ids})
                    epoch_end = run.position == len(batches)
                    if epoch_end:
                        run.epoch, run.position = run.epoch + 1, 0
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix(loss=f"{loss.item():.4f}", epoch=run.epoch)
                    every = params.validate_every
                    if (every and run.step % every == 0) or (not every and epoch_end) or run.step == total:
                        _validate(encoder, model, run, options, params)  # encode() switches to eval mode and back
                        patience_stop = _out_of_patience(run, params, dist_info)
                    if options.checkpoint is not None and dist_info.main and (epoch_end or run.step == stop_after):
                        save_checkpoint(options.checkpoint, _snapshot(model, optimizer, scheduler, run, options))
                    if stop_after is not None and run.step >= stop_after:
                        stopped = run.step < total
                        break
                    if epoch_end or patience_stop:
                        break
        if bar is not None:
            bar.close()
        model.eval()
        selected = None
        if params.select == "best" and not stopped and dist_info.main and run.best:
            selected = run.best["step"]
            model.load_state_dict(run.best["state"])
        if params.select == "best" and not stopped:
            broadcast_module(model, dist_info)  # every rank re-encodes a shard: all need rank 0's weights
        return TrainResult(run.step, total, run.history, run.validation, stopped, time.perf_counter() - started,
                           selected, patience_stop)


def train_step(encoder, batch: Batch, data: TrainingData, spec: TrainSpec,
               dist_info: Distributed = SINGLE_PROCESS) -> torch.Tensor:
    """Forward and backward of one (global) batch; returns the loss (identical on every rank).

    Scores ``s_ij = <q_i, d_j> / temperature`` over the batch's documents, or, for a query-side
    ``spec``, over every document's frozen embedding (``data.doc_matrix``): then only queries
    are encoded, the whole corpus is each query's negatives, and the document side never
    changes (no re-encoding after training).
    """
    max_length = spec.train.max_seq_length
    nq, nd = len(batch.query_ids), len(batch.doc_ids)
    q_sizes = [b - a for a, b in (shard(nq, dist_info.world, r) for r in range(dist_info.world))]
    d_sizes = [b - a for a, b in (shard(nd, dist_info.world, r) for r in range(dist_info.world))]
    q0, q1 = shard(nq, dist_info.world, dist_info.rank)
    d0, d1 = shard(nd, dist_info.world, dist_info.rank)
    with _autocast(encoder.device, spec.train.bf16):
        q_local = encoder.embed([data.query_texts[q] for q in batch.query_ids[q0:q1]], max_length)  # b x H
        if not spec.query_side:
            d_local = encoder.embed([data.doc_texts[d] for d in batch.doc_ids[d0:d1]], max_length)  # d x H
    queries = gather(q_local.float(), q_sizes, dist_info)  # B x H
    if not spec.query_side:
        docs = gather(d_local.float(), d_sizes, dist_info)  # D x H
        mask = batch.positive_mask  # B x D
    else:  # query side: the frozen embeddings of every document are the candidates, no gradient to them
        docs = data.doc_matrix.to(queries.device)  # N x H
        mask = data.corpus_mask(batch.query_ids)  # B x N
    scores = queries @ docs.T / spec.temperature  # B x D (or B x N)
    loss = spec.loss(scores, mask.to(scores.device))
    (loss * dist_info.world).backward()
    return loss.detach()


def total_steps(params: TrainParams, n_examples: int, world: int = 1) -> tuple[int, int]:
    """(steps per epoch, total steps): ``max_steps`` when set, else ``epochs`` x steps per epoch."""
    per_epoch = batches_per_epoch(n_examples, params.batch_size, min_size=world)
    if per_epoch == 0:
        raise InputError(f"{n_examples} training queries give no batch of at least {world} queries",
                         field="train.batch_size")
    return per_epoch, params.max_steps if params.max_steps is not None else params.epochs * per_epoch


# ----------------------------------------------------------------------------- its parts


def _optimizer(model: torch.nn.Module, params: TrainParams) -> torch.optim.Optimizer:
    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]  # frozen weights get no state
    decay = [p for n, p in trained if not n.endswith(NO_DECAY)]
    no_decay = [p for n, p in trained if n.endswith(NO_DECAY)]
    return torch.optim.AdamW([{"params": decay, "weight_decay": params.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=params.lr)


def schedule_factor(step: int, total: int, warmup: int, schedule: str) -> float:
    """The learning rate of step ``step`` (0-based) as a fraction of ``lr``.

    Warmup, steps ``0 .. warmup-1``: ``(step + 1) / (warmup + 1)``. After it, with
    ``t = (step - warmup) / (total - warmup)`` in [0, 1): constant ``1``, linear
    ``1 - t``, cosine ``(1 + cos(pi t)) / 2``; linear and cosine reach 0 at ``total``.
    """
    if step < warmup:
        return (step + 1) / (warmup + 1)
    t = min(1.0, (step - warmup) / max(1, total - warmup))
    if schedule == "constant":
        return 1.0
    if schedule == "linear":
        return 1.0 - t
    return 0.5 * (1.0 + math.cos(math.pi * t))  # cosine: train.schedule names one of three (core.params)


def _schedule(optimizer, params: TrainParams, total: int) -> torch.optim.lr_scheduler.LambdaLR:
    warmup = math.ceil(params.warmup_ratio * total)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: schedule_factor(step, total, warmup, params.schedule))


def _autocast(device: torch.device, cpu_bf16: bool):
    """bf16 autocast: always on CUDA; on CPU when ``train.bf16`` asks, which pays off only on a CPU with native
    bf16 (AVX512-BF16 / AMX); its speed and gradient error against fp32 are in docs/lab-notes.md."""
    if device.type == "cuda" or cpu_bf16:
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


@contextlib.contextmanager
def _deterministic(device: torch.device):
    """Deterministic kernels while training (warn-only where none exists), then the caller's setting back."""
    if device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read when cuBLAS makes its handle
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])


def _resume(options: LoopOptions, model, optimizer, scheduler, run: _Progress) -> None:
    """Load weights, optimizer, schedule, position and RNG from ``options.resume``."""
    state = load_checkpoint(options.resume, options.fingerprint)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    run.step, run.epoch, run.position = state["step"], state["epoch"], state["position"]
    run.history, run.validation = state["history"], state["validation"]
    run.best, run.since_best = state["best"], state["since_best"]
    set_rng_state(state["rng"])


def _check_order(batches: list[list[int]], data: TrainingData, run: _Progress, resume: str | Path) -> None:
    """The resumed epoch's first ``run.position`` batches, recomputed from the seed, are the checkpoint's."""
    order = [data.examples[i].query_id for b in batches[:run.position] for i in b]
    done = [q for h in run.history if h["epoch"] == run.epoch for q in h["query_ids"]]
    if order != done:
        raise InputError("the data order recomputed from the seed differs from the checkpoint's",
                         str(resume), field="history")


def _snapshot(model, optimizer, scheduler, run: _Progress, options: LoopOptions) -> dict:
    return {"format": FORMAT, "fingerprint": options.fingerprint, "model": model.state_dict(),
            "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "step": run.step,
            "epoch": run.epoch, "position": run.position, "history": run.history,
            "validation": run.validation, "best": run.best, "since_best": run.since_best, "rng": rng_state()}


def _check_selection(params: TrainParams, options: LoopOptions) -> None:
    if params.select == "best" and options.validate is None:
        raise InputError("selects the best weights on the val split, but the dataset has no val query with a "
                         "positive: give a validation split (prepare.val_from_train) or set train.select=last",
                         field="train.select")
    if params.patience is not None and options.validate is None:
        raise InputError("stops on the val split, but the dataset has no val query with a positive",
                         field="train.patience")


def improves(value: float, kept: dict | None, min_delta: float) -> bool:
    """Whether a validation ``value`` replaces the ``kept`` one (``{"value": ...}``; none yet: it does):
    ``value > kept + min_delta``. Ties and smaller gains keep the earlier, shorter-trained weights."""
    return not kept or value > kept["value"] + min_delta


def _validate(encoder, model: torch.nn.Module, run: _Progress, options: LoopOptions,
              params: TrainParams) -> None:
    """``options.validate`` on rank 0 with the plain ``model`` (a DDP forward on one rank would hang);
    remembers the best weights so far when ``params.select`` is best."""
    if options.validate is None:
        return
    if options.dist_info.main:
        wrapped, encoder.model = encoder.model, model
        try:
            scores = options.validate(encoder)
        finally:
            encoder.model = wrapped
        run.validation.append({"step": run.step, "metrics": scores})
        value = scores.get(params.select_measure)
        if value is None:
            raise InputError(f"{params.select_measure!r} is not among the validation measures "
                             f"({', '.join(scores)}): add it to evaluate.measures", field="train.select_measure")
        if improves(value, run.best, params.select_min_delta):
            run.since_best = 0
            state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
            run.best = {"step": run.step, "value": value, "state": state if params.select == "best" else {}}
        else:
            run.since_best += 1
    barrier(options.dist_info)


def _out_of_patience(run: _Progress, params: TrainParams, dist_info: Distributed) -> bool:
    """Whether ``params.patience`` validations in a row found no improvement (rank 0 decides for all)."""
    if params.patience is None:
        return False
    flag = [run.since_best >= params.patience]
    if dist_info.world > 1:
        import torch.distributed as dist

        dist.broadcast_object_list(flag, src=0)
    return bool(flag[0])
