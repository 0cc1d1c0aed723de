"""``train.backend: sentence-transformers``: :func:`fine_tune` through ``SentenceTransformerTrainer`` with
``MultipleNegativesRankingLoss``, the recipe the sentence-transformers docs teach.

It trains the same encoder in place on the same :class:`TrainingData`, validates with the same validator
(before the first step, then per ``train.validate_every``), keeps the best weights and stops on patience
as :func:`.loop.fine_tune` does, and returns the same :class:`TrainResult`, so the stage writes the same
outputs (model folder with training.json, embeddings, dvclive curves). What differs is the trainer's own:

- one row (query, positive, its negatives) per annotated positive, so a query's other positives are not
  held out of its softmax as they are under ``multi_positive_nce``; cosine scores scaled by
  ``1 / temperature``; the rows shuffled by the trainer's sampler from ``train.seed``;
- transformers' optimizer (fused AdamW, bias and LayerNorm undecayed) and schedules (``constant``:
  ``constant_with_warmup``), warmup rising from 0; a history line per step (no ``query_ids``: the
  trainer's batches are rows);
- both sides, one process (:func:`refuse_unsupported` says so first);
- ``--stop-after``/``--resume`` through the trainer's own checkpoints, carried in the same ``state.pt`` as the
  retrieval-lab backend's (:func:`_snapshot`): the weights, and the trainer's optimizer, schedule, RNG and
  position files as bytes, so the file loads with ``weights_only=True`` and transformers reads each with
  ``weights_only=True`` again; the model's folder is written anew from our own model, never from the file.

Its measured figures against :func:`.loop.fine_tune`'s are in docs/benchmarks.md (bench_finetune_peers).
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import tempfile
import time
from pathlib import Path

import torch

from ..core.errors import InputError
from ..encoder import require_native_bf16
from .checkpoint import FORMAT, load_checkpoint, save_checkpoint
from .data import TrainingData
from .loop import (
    LoopOptions,
    TrainResult,
    _check_selection,
    _deterministic,
    _out_of_patience,
    _Progress,
    _validate,
)
from .spec import TrainSpec

NAME = "sentence-transformers"
LOSS = "multi_positive_nce"  # the train.loss this backend stands in for (its own is MNRL)
SCHEDULES = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}
# the trainer's files a checkpoint carries (as bytes), under the state.pt key each goes in; all loaded by
# transformers with weights_only=True (its training_args.bin, a pickle of the arguments, is not carried)
_TRAINER_FILES = {"optimizer": "optimizer.pt", "scheduler": "scheduler.pt", "rng": "rng_state.pth"}


def refuse_unsupported(spec: TrainSpec) -> None:
    """What this backend cannot do, refused before any input is read (:func:`refuse_processes`: torchrun)."""
    field = "train.backend"
    if spec.query_side:
        raise InputError(f"variant {spec.name!r} trains the query side; the {NAME} backend trains both sides "
                         "(train.backend: retrieval-lab)", field=field)
    if spec.train.loss != LOSS:
        raise InputError(f"train.loss {spec.train.loss!r} is a loss of the retrieval-lab backend; the {NAME} "
                         f"backend trains with MultipleNegativesRankingLoss (leave train.loss at {LOSS})",
                         field=field)


def refuse_processes(world: int) -> None:
    if world > 1:
        raise InputError(f"the {NAME} backend runs in one process (torchrun: train.backend: retrieval-lab)",
                         field="train.backend")


def training_rows(data: TrainingData) -> dict[str, list[str]]:
    """The trainer's columns: anchor, positive and ``negative_1..m`` texts, one row per (query, positive),
    ``m`` the fewest negatives any query has (the trainer needs the same number in every row)."""
    m = min((len(e.negatives) for e in data.examples), default=0)
    columns: dict[str, list[str]] = {"anchor": [], "positive": [], **{f"negative_{i + 1}": [] for i in range(m)}}
    for example in data.examples:
        for positive in example.positives:
            columns["anchor"].append(data.query_texts[example.query_id])
            columns["positive"].append(data.doc_texts[positive])
            for i, negative in enumerate(example.negatives[:m]):
                columns[f"negative_{i + 1}"].append(data.doc_texts[negative])
    return columns


def planned_steps(rows: int, batch_size: int, epochs: int, max_steps: int | None) -> int:
    """The trainer's step count: ``ceil(rows / batch)`` a epoch (the last batch kept), or ``max_steps``."""
    return max_steps if max_steps is not None else epochs * math.ceil(rows / batch_size)


@contextlib.contextmanager
def _no_progress_bars():
    """transformers' progress bars off while we copy a model to or from disk, then as they were."""
    from transformers.utils import logging

    bars = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars:
            logging.enable_progress_bar()


def _sentence_transformer(encoder, max_seq_length: int):
    """A SentenceTransformer (transformer, mean pooling) whose transformer IS ``encoder.model``: the trainer
    moves the encoder's own weights (the module loads a saved copy, then holds the encoder's model instead)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    # the copy's write and read are not the user's progress
    with _no_progress_bars(), tempfile.TemporaryDirectory() as folder:
        encoder.model.save_pretrained(folder, safe_serialization=True)
        encoder.tokenizer.save_pretrained(folder)
        module = Transformer(folder, max_seq_length=max_seq_length, model_kwargs={"trust_remote_code": False})
    module.model = encoder.model
    return SentenceTransformer(modules=[module, Pooling(encoder.dim, "mean")], device=str(encoder.device))


def fine_tune(encoder, data: TrainingData, spec: TrainSpec, options: LoopOptions) -> TrainResult:
    """Train ``encoder`` in place with ``SentenceTransformerTrainer``; validation, selection and patience
    as :func:`.loop.fine_tune`'s (the same private helpers), the history from the trainer's per-step log."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer
    from sentence_transformers import SentenceTransformerTrainingArguments as Arguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import PrinterCallback, TrainerCallback

    class _Trainer(SentenceTransformerTrainer):
        def add_model_card_callback(self, default_args_dict) -> None:
            """No model card: the stage writes training.json (the card's widget draws from Python's random)."""

    params = spec.train
    refuse_unsupported(spec)
    refuse_processes(options.dist_info.world)
    if params.bf16:
        require_native_bf16(encoder.device, "train.bf16")
    columns = training_rows(data)
    rows = len(columns["anchor"])
    if rows == 0:
        raise InputError("no training query has a positive", field="train.positives_per_query")
    total = planned_steps(rows, params.batch_size, params.epochs, params.max_steps)
    with _deterministic(encoder.device):
        started = time.perf_counter()
        torch.manual_seed(params.seed)
        model = encoder.model
        if params.freeze_word_embeddings:
            model.get_input_embeddings().weight.requires_grad_(False)
        run = _Progress()
        state = None
        if options.resume is not None:
            state = load_checkpoint(options.resume, options.fingerprint)
            _restore(state, model, run, options.resume)
        stop_after = options.stop_after
        if stop_after is not None and run.step >= stop_after:
            raise InputError(f"the run is already at step {run.step}; --stop-after must be larger",
                             field="--stop-after")
        _check_selection(params, options)
        if run.step == 0:
            _validate(encoder, model, run, options, params)  # step 0: the base model
        every = params.validate_every
        patience_stop: list[int] = []
        stopped: list[int] = []

        class Follow(TrainerCallback):
            """The per-step history, validation, selection and patience as our loop does them, and its checkpoints."""

            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs and "loss" in logs:
                    run.history.append({"step": state.global_step, "epoch": math.ceil(state.epoch) - 1,
                                        "loss": float(logs["loss"]), "lr": float(logs["learning_rate"])})

            def on_step_end(self, args, state, control, **kwargs):
                run.step = state.global_step
                epoch_end = state.global_step % math.ceil(rows / params.batch_size) == 0
                if (every and run.step % every == 0) or (not every and epoch_end) or run.step == total:
                    _validate(encoder, model, run, options, params)  # encode() switches to eval mode and back
                    if _out_of_patience(run, params, options.dist_info):
                        patience_stop.append(run.step)
                        control.should_training_stop = True
                if options.checkpoint is not None and (epoch_end or run.step == stop_after):
                    control.should_save = True  # the trainer writes its folder, then on_save packs it
                if stop_after is not None and run.step >= stop_after and run.step < total:
                    stopped.append(run.step)
                    control.should_training_stop = True
                return control

            def on_save(self, args, state, control, **kwargs):
                folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                save_checkpoint(options.checkpoint, _snapshot(folder, model, run, options, state.epoch))
                shutil.rmtree(folder)  # one checkpoint at a time, as the retrieval-lab backend keeps
                return control

        train_set = Dataset.from_dict(columns)
        with tempfile.TemporaryDirectory() as scratch:
            arguments = Arguments(
                output_dir=scratch, num_train_epochs=params.epochs, max_steps=params.max_steps or -1,
                per_device_train_batch_size=params.batch_size, learning_rate=params.lr,
                lr_scheduler_type=SCHEDULES[params.schedule], warmup_steps=math.ceil(params.warmup_ratio * total),
                weight_decay=params.weight_decay, max_grad_norm=params.max_grad_norm or 0.0, seed=params.seed,
                data_seed=params.seed, bf16=params.bf16 and encoder.device.type == "cpu" or
                encoder.device.type == "cuda", use_cpu=encoder.device.type == "cpu", save_strategy="no",
                report_to="none", logging_strategy="steps", logging_steps=1, disable_tqdm=not options.progress)
            st_model = _sentence_transformer(encoder, params.max_seq_length)
            loss = MultipleNegativesRankingLoss(st_model, scale=1.0 / spec.temperature)
            trainer = _Trainer(model=st_model, args=arguments, train_dataset=train_set, loss=loss,
                               callbacks=[Follow()])
            trainer.remove_callback(PrinterCallback)  # the log dicts on stdout: our history holds them
            resume_from = None
            if state is not None:
                resume_from = _trainer_folder(state, st_model, Path(scratch) / f"checkpoint-{state['step']}")
            trainer.train(resume_from_checkpoint=resume_from)
        model.eval()
        selected = None
        if params.select == "best" and run.best:
            selected = run.best["step"]
            model.load_state_dict(run.best["state"])
        return TrainResult(run.step, total, run.history, run.validation, bool(stopped),
                           time.perf_counter() - started, selected, bool(patience_stop))


def _snapshot(folder: Path, model, run: _Progress, options: LoopOptions, epoch: float) -> dict:
    """``state.pt`` of this backend: the keys of the retrieval-lab backend's, the trainer's files (``folder``,
    the checkpoint it just wrote) as bytes under ``optimizer``, ``scheduler`` and ``rng``, its position
    (trainer_state.json: step, epoch, the sampler's place) as text."""
    blobs = {key: torch.frombuffer(bytearray((folder / name).read_bytes()), dtype=torch.uint8)
             for key, name in _TRAINER_FILES.items()}
    return {"format": FORMAT, "fingerprint": options.fingerprint, "model": model.state_dict(), **blobs,
            "step": run.step, "epoch": epoch, "position": (folder / "trainer_state.json").read_text(encoding="utf-8"),
            "history": run.history, "validation": run.validation, "best": run.best, "since_best": run.since_best}


def _restore(state: dict, model, run: _Progress, path) -> None:
    """The weights and where the run stands, from a checkpoint :func:`_snapshot` wrote (the fingerprint, which
    names the backend, already matched)."""
    for key in _TRAINER_FILES:
        if not (isinstance(state[key], torch.Tensor) and state[key].dtype == torch.uint8 and state[key].dim() == 1):
            raise InputError("not a checkpoint of the sentence-transformers backend (no trainer file)", str(path),
                             field=key)
    if not isinstance(state["position"], str):
        raise InputError("not a checkpoint of the sentence-transformers backend (no trainer state)", str(path),
                         field="position")
    try:
        json.loads(state["position"])
    except ValueError:
        raise InputError("the trainer state is not JSON", str(path), field="position") from None
    model.load_state_dict(state["model"])
    run.step, run.history, run.validation = state["step"], state["history"], state["validation"]
    run.best, run.since_best = state["best"], state["since_best"]


def _trainer_folder(state: dict, st_model, folder: Path) -> str:
    """The trainer's checkpoint folder to resume from: the model's files written anew from our own model (its
    weights already the checkpoint's), the trainer's files from the checkpoint's bytes."""
    with _no_progress_bars():
        st_model.save(str(folder))
    for key, name in _TRAINER_FILES.items():
        (folder / name).write_bytes(state[key].numpy().tobytes())
    (folder / "trainer_state.json").write_text(state["position"], encoding="utf-8")
    return str(folder)
