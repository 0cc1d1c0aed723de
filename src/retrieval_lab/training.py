"""Contrastive fine-tuning of the dense encoder (stage ``train``), resumable and verified.

One step: B training queries and the documents of their batch (positives + mined
negatives, deduplicated by ID; :mod:`retrieval_lab.batching`) are embedded, scored
``s_ij = <q_i, d_j> / temperature``, and :func:`~retrieval_lab.losses.multi_positive_nce`
is minimised with the positive mask joined on IDs. Every document of the batch is
a candidate for every query, so the other queries' documents act as in-batch
negatives alongside the mined ones. AdamW, linear warmup then linear decay.

Determinism. On CPU a run is a function of (base weights, data, params, seed):
data order comes from ``(seed, epoch)``, dropout from the seeded torch generator,
and ``torch.use_deterministic_algorithms`` is on, so an interrupted and resumed run
reproduces the uninterrupted one bit for bit (``compare-resume`` checks it) on the
same machine and thread count. On CUDA, bf16 autocast and cuBLAS/cuDNN kernel
choices make runs repeatable only to rounding (``CUBLAS_WORKSPACE_CONFIG`` is set
and deterministic algorithms requested, warn-only where none exist); under DDP
each rank draws its own dropout, so the run also depends on the world size, which
the checkpoint fingerprint records.

DDP (``torchrun --nproc_per_node N``): every rank builds the same global batch,
embeds its contiguous shard of the queries and of the documents, and all-gathers
the embeddings (its own shard keeps its graph) so the score matrix spans the
global batch. Each rank's loss is the global loss; backpropagating ``world x loss``
makes DDP's gradient average equal the single-process gradient.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .batching import (
    Batch,
    Example,
    build_examples,
    epoch_batches,
    examples_digest,
    make_batch,
    shard,
)
from .core.atomic import atomic_path, write_json
from .core.config import DenseParams, Params, TrainParams, TrainVariant
from .core.data import Dataset
from .core.errors import InputError
from .losses import multi_positive_nce
from .mining import annotated_positives, read_negatives, read_strategy

LOSS_NAME = "multi_positive_nce"
STATE_KEYS = ("format", "fingerprint", "model", "optimizer", "scheduler", "step", "epoch", "position",
              "history", "validation", "rng")
FORMAT = 1
NO_DECAY = ("bias", "LayerNorm.weight", "LayerNorm.bias")  # the usual BERT convention


# ----------------------------------------------------------------------------- inputs


@dataclass
class TrainingData:
    examples: list[Example]
    relevant: dict[str, set[str]]  # query id -> documents annotated relevant in any split
    query_texts: dict[str, str]
    doc_texts: dict[str, str]


def training_data(dataset: Dataset, negatives: str | Path, positives_per_query: int, fields: list[str],
                  at_least: bool = False) -> TrainingData:
    records = read_negatives(negatives)
    examples = build_examples(dataset, records, positives_per_query, at_least, str(negatives))
    docs = {d for e in examples for d in (*e.positives, *e.negatives)}
    return TrainingData(examples, annotated_positives(dataset),
                        {e.query_id: dataset.queries[e.query_id].text for e in examples},
                        {d: dataset.corpus[d].content(fields) for d in sorted(docs)})


def variant_of(params: TrainParams, name: str) -> TrainVariant:
    if name not in params.variants:
        raise InputError(f"unknown variant {name!r} (choices: {', '.join(sorted(params.variants))})",
                         field="--variant")
    return params.variants[name]


def check_negatives_strategy(negatives: str | Path, variant_name: str, variant: TrainVariant) -> None:
    """Refuse a negatives file mined with another strategy than the variant asks for."""
    strategy = read_strategy(negatives)
    if strategy is not None and strategy != variant.negatives:
        raise InputError(f"variant {variant_name!r} trains on {variant.negatives!r} negatives but this file "
                         f"was mined with strategy {strategy!r}", str(negatives))


# ----------------------------------------------------------------------------- distribution


@dataclass(frozen=True)
class Distributed:
    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_distributed(device: str = "auto") -> tuple[Distributed, str]:
    """Join the torchrun process group when ``WORLD_SIZE`` > 1 (nccl on CUDA, gloo on CPU)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Distributed(), device
    import torch.distributed as dist

    cuda = torch.cuda.is_available() and device in ("auto", "cuda")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    return Distributed(dist.get_rank(), dist.get_world_size()), (f"cuda:{local}" if cuda else "cpu")


def _gather(local: torch.Tensor, sizes: list[int], dist_info: Distributed) -> torch.Tensor:
    """All ranks' rows in rank order; only this rank's rows carry gradient."""
    if dist_info.world == 1:
        return local
    import torch.distributed as dist

    width = max(sizes)
    padded = F.pad(local, (0, 0, 0, width - local.shape[0]))  # width x H
    buckets = [torch.empty_like(padded) for _ in range(dist_info.world)]
    dist.all_gather(buckets, padded.detach().contiguous())
    buckets[dist_info.rank] = padded  # our shard keeps its graph
    return torch.cat([b[:n] for b, n in zip(buckets, sizes)])  # sum(sizes) x H


@contextlib.contextmanager
def distributed_model(encoder, dist_info: Distributed):
    """While training, route ``encoder.embed`` through a DistributedDataParallel wrapper."""
    if dist_info.world == 1:
        yield encoder.model
        return
    from torch.nn.parallel import DistributedDataParallel

    plain = encoder.model
    unused = _unused_parameters(encoder)
    for p in unused:  # e.g. BERT's pooler: DDP would wait forever for its gradient
        p.requires_grad_(False)
    ids = [encoder.device.index] if encoder.device.type == "cuda" else None
    encoder.model = DistributedDataParallel(plain, device_ids=ids)
    try:
        yield encoder.model
    finally:
        encoder.model = plain
        for p in unused:
            p.requires_grad_(True)


def _unused_parameters(encoder) -> list[torch.nn.Parameter]:
    """Parameters that get no gradient from ``embed`` (probed on one text, RNG state untouched)."""
    params = [p for p in encoder.model.parameters() if p.requires_grad]
    with torch.random.fork_rng(devices=[encoder.device] if encoder.device.type == "cuda" else []):
        grads = torch.autograd.grad(encoder.embed(["probe"], 8).sum(), params, allow_unused=True)
    return [p for p, g in zip(params, grads) if g is None]


# ----------------------------------------------------------------------------- one step


def _autocast(device: torch.device):
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def train_step(encoder, batch: Batch, data: TrainingData, max_length: int, temperature: float,
               dist_info: Distributed = Distributed()) -> torch.Tensor:
    """Forward and backward of one (global) batch; returns the loss (identical on every rank)."""
    nq, nd = len(batch.query_ids), len(batch.doc_ids)
    q_sizes = [b - a for a, b in (shard(nq, dist_info.world, r) for r in range(dist_info.world))]
    d_sizes = [b - a for a, b in (shard(nd, dist_info.world, r) for r in range(dist_info.world))]
    q0, q1 = shard(nq, dist_info.world, dist_info.rank)
    d0, d1 = shard(nd, dist_info.world, dist_info.rank)
    with _autocast(encoder.device):
        q_local = encoder.embed([data.query_texts[q] for q in batch.query_ids[q0:q1]], max_length)  # b x H
        d_local = encoder.embed([data.doc_texts[d] for d in batch.doc_ids[d0:d1]], max_length)  # d x H
    queries = _gather(q_local.float(), q_sizes, dist_info)  # B x H
    docs = _gather(d_local.float(), d_sizes, dist_info)  # D x H
    scores = queries @ docs.T / temperature  # B x D
    loss = multi_positive_nce(scores, batch.positive_mask.to(scores.device))
    (loss * dist_info.world).backward()
    return loss.detach()


# ----------------------------------------------------------------------------- checkpoints


def weights_digest(model: torch.nn.Module) -> str:
    """sha256 over parameter names, shapes and bytes: the model's identity."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def fingerprint(model_digest: str, params: TrainParams, variant_name: str, variant: TrainVariant,
                data: TrainingData, world: int = 1) -> dict:
    """What must match for a checkpoint to continue this run (validate_every does not change training)."""
    train = {k: v for k, v in dataclasses.asdict(params).items()
             if k not in ("variants", "validate_every", "positives_at_least")}
    # The positives rule as one value, spelled as before it had two fields: checkpoints and
    # training.json written then still match, and the default's bytes do not change.
    if params.positives_at_least:
        train["positives_per_query"] = f"at least {params.positives_per_query}"
    return {
        "model": {"weights_sha256": model_digest},
        "data": {"examples_sha256": examples_digest(data.examples), "examples": len(data.examples)},
        "train": train,
        "variant": {"name": variant_name, **dataclasses.asdict(variant)},
        "loss": LOSS_NAME,
        "world_size": world,
    }


def _flatten(obj, prefix: str = "") -> dict:
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            out.update(_flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: obj}


def fingerprint_differences(saved: dict, current: dict) -> list[str]:
    a, b = _flatten(saved), _flatten(current)
    return [f"{k}: checkpoint {a.get(k, '<absent>')!r}, now {b.get(k, '<absent>')!r}"
            for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: str | Path, state: dict) -> None:
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: str | Path, current: dict | None = None) -> dict:
    """Read ``state.pt``; with ``current``, refuse a checkpoint of another model or config, naming the difference."""
    path = Path(path)
    if not path.is_file():
        raise InputError("checkpoint not found", str(path))
    state = torch.load(path, map_location="cpu", weights_only=False)  # our own file: holds RNG tuples
    missing = [k for k in STATE_KEYS if k not in state]
    if missing:
        raise InputError(f"not a training checkpoint (missing {', '.join(missing)})", str(path), field=missing[0])
    if current is not None:
        diff = fingerprint_differences(state["fingerprint"], current)
        if diff:
            raise InputError(f"checkpoint made with a different model or config: {'; '.join(diff)}",
                             str(path), field="fingerprint")
    return state


# ----------------------------------------------------------------------------- the loop


@dataclass
class TrainResult:
    steps: int
    total_steps: int
    history: list[dict]  # one per step: step, epoch, loss, lr, query_ids
    validation: list[dict] = field(default_factory=list)  # step, metrics
    stopped_early: bool = False
    seconds: float = 0.0


def _optimizer(model: torch.nn.Module, params: TrainParams) -> torch.optim.Optimizer:
    decay = [p for n, p in model.named_parameters() if not n.endswith(NO_DECAY)]
    no_decay = [p for n, p in model.named_parameters() if n.endswith(NO_DECAY)]
    return torch.optim.AdamW([{"params": decay, "weight_decay": params.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=params.lr)


def _schedule(optimizer, warmup: int, total: int) -> torch.optim.lr_scheduler.LambdaLR:
    def factor(step: int) -> float:  # linear warmup to lr, then linear decay to 0 at `total`
        if step < warmup:
            return (step + 1) / (warmup + 1)
        return max(0.0, (total - step) / max(1, total - warmup))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def total_steps(params: TrainParams, n_examples: int, world: int = 1) -> tuple[int, int]:
    """(steps per epoch, total steps): ``max_steps`` when set, else ``epochs`` x steps per epoch."""
    per_epoch = len(epoch_batches(n_examples, params.batch_size, params.seed, 0, min_size=world))
    if per_epoch == 0:
        raise InputError(f"{n_examples} training queries give no batch of at least {world} queries",
                         field="train.batch_size")
    return per_epoch, params.max_steps if params.max_steps is not None else params.epochs * per_epoch


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


def fine_tune(encoder, data: TrainingData, params: TrainParams, temperature: float, fingerprint_: dict, *,
              stop_after: int | None = None, resume: str | Path | None = None,
              checkpoint: str | Path | None = None, validate: Callable[[object], dict] | None = None,
              dist_info: Distributed = Distributed(), progress: bool = True) -> TrainResult:
    """Train ``encoder`` in place; see the module docstring for what is reproducible.

    ``stop_after``: stop once the global step reaches it, saving ``checkpoint``.
    ``resume``: continue from a checkpoint (refused if its fingerprint differs).
    ``checkpoint``: also written at every epoch end. ``validate(encoder) -> metrics``
    runs on rank 0 before training, every ``validate_every`` steps (0: each epoch
    end) and at the last step.
    """
    with _deterministic(encoder.device):
        return _fine_tune(encoder, data, params, temperature, fingerprint_, stop_after, resume, checkpoint,
                          validate, dist_info, progress)


def _fine_tune(encoder, data, params, temperature, fingerprint_, stop_after, resume, checkpoint, validate,
               dist_info, progress) -> TrainResult:
    started = time.perf_counter()
    random.seed(params.seed)
    np.random.seed(params.seed)
    torch.manual_seed(params.seed)
    model = encoder.model
    optimizer = _optimizer(model, params)
    _, total = total_steps(params, len(data.examples), dist_info.world)
    scheduler = _schedule(optimizer, math.ceil(params.warmup_ratio * total), total)
    step = epoch = position = 0
    history: list[dict] = []
    validation: list[dict] = []
    if resume is not None:
        state = load_checkpoint(resume, fingerprint_)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        step, epoch, position = state["step"], state["epoch"], state["position"]
        history, validation = state["history"], state["validation"]
        _set_rng_state(state["rng"])
        order = [data.examples[i].query_id for b in epoch_batches(len(data.examples), params.batch_size,
                                                                  params.seed, epoch, dist_info.world)[:position]
                 for i in b]
        done = [q for h in history if h["epoch"] == epoch for q in h["query_ids"]]
        if order != done:
            raise InputError("the data order recomputed from the seed differs from the checkpoint's",
                             str(resume), field="history")

    def snapshot() -> dict:
        return {"format": FORMAT, "fingerprint": fingerprint_, "model": model.state_dict(),
                "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "step": step,
                "epoch": epoch, "position": position, "history": history, "validation": validation,
                "rng": _rng_state()}

    def run_validation() -> None:
        if validate is None:
            return
        if dist_info.main:
            wrapped, encoder.model = encoder.model, model  # plain model: a DDP forward on one rank would hang
            try:
                validation.append({"step": step, "metrics": validate(encoder)})
            finally:
                encoder.model = wrapped
        if dist_info.world > 1:
            import torch.distributed as dist

            dist.barrier()

    if stop_after is not None and step >= stop_after:
        raise InputError(f"the run is already at step {step}; --stop-after must be larger", field="--stop-after")
    if step == 0:
        run_validation()
    bar = None
    if progress and dist_info.main:
        from tqdm import tqdm

        bar = tqdm(total=total, initial=step, desc="train", unit="step", dynamic_ncols=True)
    model.train()
    stopped = False
    with distributed_model(encoder, dist_info):
        while step < total and not stopped:
            batches = epoch_batches(len(data.examples), params.batch_size, params.seed, epoch, dist_info.world)
            while position < len(batches) and step < total:
                examples = [data.examples[i] for i in batches[position]]
                batch = make_batch(examples, data.relevant)
                lr = scheduler.get_last_lr()[0]
                loss = train_step(encoder, batch, data, params.max_seq_length, temperature, dist_info)
                if params.max_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), params.max_grad_norm)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                position += 1
                history.append({"step": step, "epoch": epoch, "loss": loss.item(), "lr": lr,
                                "query_ids": batch.query_ids})
                epoch_end = position == len(batches)
                if epoch_end:
                    epoch, position = epoch + 1, 0
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{loss.item():.4f}", epoch=epoch)
                every = params.validate_every
                if (every and step % every == 0) or (not every and epoch_end) or step == total:
                    run_validation()  # encode() switches to eval mode and back
                if checkpoint is not None and dist_info.main and (epoch_end or step == stop_after):
                    save_checkpoint(checkpoint, snapshot())
                if stop_after is not None and step >= stop_after:
                    stopped = step < total
                    break
                if epoch_end:
                    break
    if bar is not None:
        bar.close()
    model.eval()
    return TrainResult(step, total, history, validation, stopped, time.perf_counter() - started)


# ----------------------------------------------------------------------------- validation


_SCORES_BUDGET = 1 << 24  # query x document scores held at once (64 MiB of float32)


def _top_stable(row: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest values, lower index first among equals: a stable descending sort's
    first ``k``, in O(n + k log k) instead of O(n log n)."""
    if k <= 0:
        return np.zeros(0, np.int64)
    kth = np.partition(row, len(row) - k)[len(row) - k]
    candidates = np.flatnonzero(row >= kth)  # every tie at the cut
    return candidates[np.lexsort((candidates, -row[candidates]))[:k]]


def dense_means(encoder, qrels: dict, query_texts: dict[str, str], doc_texts: dict[str, str],
                dense: DenseParams, depth: int, measures: list[str]) -> dict[str, float]:
    """Encode queries and documents, rank every document by dot product, return the mean of each measure."""
    from .metrics import evaluate

    query_ids, doc_ids = sorted(qrels), list(doc_texts)
    q = encoder.encode([query_texts[i] for i in query_ids], dense.batch_size, dense.max_seq_length,
                       dense.bf16)  # Q x H
    d = encoder.encode([doc_texts[i] for i in doc_ids], dense.batch_size, dense.max_seq_length, dense.bf16)  # N x H
    k = min(depth, len(doc_ids))
    run = {}
    chunk = max(1, _SCORES_BUDGET // max(len(doc_ids), 1))  # queries scored at once: no Q x N matrix
    for start in range(0, len(query_ids), chunk):
        scores = q[start:start + chunk] @ d.T  # c x N
        for i, row in enumerate(scores):
            run[query_ids[start + i]] = {doc_ids[j]: float(row[j]) for j in _top_stable(row, k)}
    return evaluate(qrels, run, measures).means


def validator(dataset: Dataset, fields: list[str], params: Params) -> Callable[[object], dict] | None:
    """Score the val queries against the whole corpus with :func:`dense_means` (None: no val query)."""
    qrels = {q: j for q, j in dataset.qrels.get("val", {}).items() if any(r > 0 for r in j.values())}
    if not qrels:
        return None
    query_texts = {q: dataset.queries[q].text for q in qrels}
    doc_texts = {d: dataset.corpus[d].content(fields) for d in dataset.corpus}
    measures = list(params.evaluate.measures)
    return lambda encoder: dense_means(encoder, qrels, query_texts, doc_texts, params.dense,
                                       params.retrieve.depth, measures)


# ----------------------------------------------------------------------------- outputs


def write_live(live_dir: str | Path, result: TrainResult) -> None:
    """The dvclive folder (plots/metrics/train/{loss,lr}.tsv, val/*.tsv, metrics.json), atomically."""
    from dvclive import Live

    with atomic_path(live_dir, is_dir=True) as tmp:
        live = Live(str(tmp), dvcyaml=None, save_dvc_exp=False, report=None)
        val_at = {v["step"]: v["metrics"] for v in result.validation}
        for step in sorted(set(val_at) | {h["step"] for h in result.history}):
            live.step = step
            for h in result.history:
                if h["step"] == step:
                    live.log_metric("train/loss", h["loss"])
                    live.log_metric("train/lr", h["lr"])
            for name, value in val_at.get(step, {}).items():
                live.log_metric(f"val/{name}", value)
        live.make_summary()
        live.end()


def save_model(encoder, directory: str | Path, report: dict) -> None:
    """Hugging Face folder (model + tokenizer) plus training.json, renamed into place together."""
    with atomic_path(directory, is_dir=True) as tmp:
        encoder.model.save_pretrained(tmp)
        encoder.tokenizer.save_pretrained(tmp)
        write_json(tmp / "training.json", report)


def default_checkpoint(model_out: str | Path) -> Path:
    model_out = Path(model_out)
    return model_out.with_name(model_out.name + ".checkpoint") / "state.pt"


def run_training(params: Params, dataset_dir: str | Path, negatives: str | Path, variant_name: str,
                 model_out: str | Path, embeddings_out: str | Path, live_dir: str | Path, *,
                 stop_after: int | None = None, resume: str | Path | None = None,
                 checkpoint: str | Path | None = None, progress: bool = True) -> TrainResult:
    """The ``train`` stage: load base model and data, fine-tune, save model, encode the dataset, log."""
    from .core.data import empty_documents_note, load_dataset
    from .encoder import encode_dataset, load

    train = params.train
    variant = variant_of(train, variant_name)
    check_negatives_strategy(negatives, variant_name, variant)
    dist_info, device = init_distributed(params.dense.device)
    dataset = load_dataset(dataset_dir)
    fields = list(params.retrieve.fields)
    note = empty_documents_note(dataset.corpus, fields, "an empty positive trains on an empty text")
    if note and dist_info.main:
        print(f"train: {note}")
    data = training_data(dataset, negatives, train.positives_per_query, fields, train.positives_at_least)
    encoder = load(params.dense.lock, device, "dense.lock")
    fp = fingerprint(weights_digest(encoder.model), train, variant_name, variant, data, dist_info.world)
    if stop_after is not None and checkpoint is None:
        checkpoint = default_checkpoint(model_out)
    result = fine_tune(encoder, data, train, variant.temperature, fp, stop_after=stop_after, resume=resume,
                       checkpoint=checkpoint, validate=validator(dataset, fields, params),
                       dist_info=dist_info, progress=progress)
    if dist_info.main and not result.stopped_early:
        report = {"variant": variant_name, "fingerprint": fp, "steps": result.steps,
                  "device": str(encoder.device), "world_size": dist_info.world,
                  "first_loss": result.history[0]["loss"], "last_loss": result.history[-1]["loss"],
                  "validation": result.validation, "negatives": str(negatives),
                  "base_model": encoder.source}
        save_model(encoder, model_out, report)
        encode_dataset(encoder, dataset, embeddings_out, params.dense, fields)
        write_live(live_dir, result)
    if dist_info.world > 1:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    return result


# ----------------------------------------------------------------------------- resume equivalence


def _max_abs_diff(a: torch.nn.Module, b: torch.nn.Module) -> float:
    sa, sb = a.state_dict(), b.state_dict()
    if sa.keys() != sb.keys():
        return math.inf
    return max(((sa[k].float() - sb[k].float()).abs().max().item() for k in sa if sa[k].numel()), default=0.0)


def compare_resume(load_encoder: Callable[[], object], data: TrainingData, params: TrainParams,
                   variant_name: str, variant: TrainVariant, stop_after: int, workdir: str | Path) -> dict:
    """Train ``params.max_steps`` steps straight, and again stopped at ``stop_after`` then resumed.

    Checks: same step count, same data order, identical loss sequences, parameters
    bitwise equal (max abs diff 0; required on CPU, reported on CUDA).
    """
    total = params.max_steps
    if total is None or not 0 < stop_after < total:
        raise InputError(f"need 0 < stop_after ({stop_after}) < max_steps ({total})", field="--stop-after")
    checkpoint = Path(workdir) / "state.pt"
    straight_enc = load_encoder()
    fp = fingerprint(weights_digest(straight_enc.model), params, variant_name, variant, data)
    kwargs = {"progress": False}
    straight = fine_tune(straight_enc, data, params, variant.temperature, fp, **kwargs)
    first = fine_tune(load_encoder(), data, params, variant.temperature, fp, stop_after=stop_after,
                      checkpoint=checkpoint, **kwargs)
    resumed_enc = load_encoder()
    resumed = fine_tune(resumed_enc, data, params, variant.temperature, fp, resume=checkpoint, **kwargs)
    state = load_checkpoint(checkpoint, fp)
    diff = _max_abs_diff(straight_enc.model, resumed_enc.model)
    on_cpu = straight_enc.device.type == "cpu"
    straight_losses = [h["loss"] for h in straight.history]
    resumed_losses = [h["loss"] for h in resumed.history]
    checks = {
        "stopped_at_checkpoint": first.stopped_early and first.steps == stop_after == state["step"],
        "same_step_count": straight.steps == resumed.steps == total,
        "same_data_order": [h["query_ids"] for h in straight.history] == [h["query_ids"] for h in resumed.history],
        "identical_losses": straight_losses == resumed_losses,
        "parameters_bitwise_equal": diff == 0.0 if on_cpu else True,
    }
    return {
        "passed": all(checks.values()),
        "checks": checks,
        "device": str(straight_enc.device),
        "steps": total,
        "stop_after": stop_after,
        "max_abs_param_diff": diff,
        "straight_losses": straight_losses,
        "resumed_losses": resumed_losses,
        "first_part_losses": [h["loss"] for h in first.history],
        "checkpoint_keys": sorted(state),
        "fingerprint": fp,
    }
