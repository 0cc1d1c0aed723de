"""The resume-equivalence check (``check-resume``): a run stopped and resumed equals a straight one."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import torch

from ..core.errors import InputError
from .checkpoint import fingerprint, load_checkpoint, weights_digest
from .data import TrainingData
from .loop import LoopOptions
from .spec import TrainSpec


def _max_abs_diff(a: torch.nn.Module, b: torch.nn.Module) -> float:
    sa, sb = a.state_dict(), b.state_dict()
    if sa.keys() != sb.keys():
        return math.inf
    return max(((sa[k].float() - sb[k].float()).abs().max().item() for k in sa if sa[k].numel()), default=0.0)


def check_resume(load_encoder: Callable[[], object], data: TrainingData, spec: TrainSpec, stop_after: int,
                 workdir: str | Path) -> dict:
    """Train ``spec.train.max_steps`` steps straight, and again stopped at ``stop_after`` then resumed, with the
    ``train.backend`` of ``spec``.

    Checks: same step count, identical loss sequences, parameters bitwise equal (max abs diff 0; required on
    CPU, reported on CUDA), and the same data order where the backend records it (the retrieval-lab
    backend's query ids per step; the sentence-transformers trainer's batches are its sampler's, seen
    through the losses only).
    """
    total = spec.train.max_steps
    if total is None or not 0 < stop_after < total:
        raise InputError(f"need 0 < stop_after ({stop_after}) < max_steps ({total})", field="--stop-after")
    checkpoint = Path(workdir) / "state.pt"
    # the check is about the trajectory, without a val split: no selection, no early stop
    spec = spec.changed(select="last", patience=None)
    fine_tune = spec.fine_tune
    straight_enc = load_encoder()
    fp = fingerprint(weights_digest(straight_enc.model), spec, data)
    straight = fine_tune(straight_enc, data, spec, LoopOptions(fp, progress=False))
    first = fine_tune(load_encoder(), data, spec,
                      LoopOptions(fp, stop_after=stop_after, checkpoint=checkpoint, progress=False))
    resumed_enc = load_encoder()
    resumed = fine_tune(resumed_enc, data, spec, LoopOptions(fp, resume=checkpoint, progress=False))
    state = load_checkpoint(checkpoint, fp)
    diff = _max_abs_diff(straight_enc.model, resumed_enc.model)
    on_cpu = straight_enc.device.type == "cpu"
    straight_losses = [h["loss"] for h in straight.history]
    resumed_losses = [h["loss"] for h in resumed.history]
    checks = {
        "stopped_at_checkpoint": first.stopped_early and first.steps == stop_after == state["step"],
        "same_step_count": straight.steps == resumed.steps == total,
        "identical_losses": straight_losses == resumed_losses,
        "parameters_bitwise_equal": diff == 0.0 if on_cpu else True,
    }
    if spec.train.backend == "retrieval-lab":  # the other backend's history has no query ids to compare
        checks["same_data_order"] = ([h["query_ids"] for h in straight.history] ==
                                     [h["query_ids"] for h in resumed.history])
    return {
        "passed": all(checks.values()),
        "checks": checks,
        "backend": spec.train.backend,
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
