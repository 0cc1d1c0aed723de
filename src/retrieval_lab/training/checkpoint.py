"""A run's identity (the fingerprint a checkpoint must match) and its resumable state (``state.pt``)."""

from __future__ import annotations

import dataclasses
import hashlib
import random
from pathlib import Path

import numpy as np
import torch

from ..batching import examples_digest
from ..core.atomic import atomic_path
from ..core.config import TrainParams, TrainVariant
from ..core.errors import InputError
from .data import TrainingData

STATE_KEYS = ("format", "fingerprint", "model", "optimizer", "scheduler", "step", "epoch", "position",
              "history", "validation", "rng")
FORMAT = 1


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
             if k not in ("variants", "validate_every", "positives_at_least", "loss")}
    # The positives rule as one value, spelled as before it had two fields: checkpoints and
    # training.json written then still match, and the default's bytes do not change.
    if params.positives_at_least:
        train["positives_per_query"] = f"at least {params.positives_per_query}"
    if params.schedule == "linear":  # the only schedule before it was a parameter: absent means linear
        del train["schedule"]
    return {
        "model": {"weights_sha256": model_digest},
        "data": {"examples_sha256": examples_digest(data.examples), "examples": len(data.examples)},
        "train": train,
        "variant": {"name": variant_name, **_variant_fields(variant)},
        "loss": params.loss,
        "world_size": world,
    }


def _variant_fields(variant: TrainVariant) -> dict:
    """The variant's fields, leaving out side and epochs at their defaults (fields added later: the
    fingerprints written before them still match)."""
    fields = dataclasses.asdict(variant)
    if fields["side"] == "both":
        del fields["side"]
    if fields["epochs"] is None:
        del fields["epochs"]
    return fields


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


def rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
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


def default_checkpoint(model_out: str | Path) -> Path:
    model_out = Path(model_out)
    return model_out.with_name(model_out.name + ".checkpoint") / "state.pt"
