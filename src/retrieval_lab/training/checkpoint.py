"""A run's identity (the fingerprint a checkpoint must match) and its resumable state (``state.pt``)."""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
import random
import re
from pathlib import Path

import numpy as np
import torch

from ..core.atomic import atomic_path
from ..core.errors import InputError
from ..core.kinds import CHECKPOINT
from ..core.params_file import dotted_items
from .batching import examples_digest
from .data import TrainingData
from .spec import TrainSpec

STATE_KEYS = ("format", "fingerprint", "model", "optimizer", "scheduler", "step", "epoch", "position",
              "history", "validation", "rng")
FORMAT = 2  # 2: RNG states as tensors and ints (loads with weights_only=True)


def weights_digest(model: torch.nn.Module) -> str:
    """sha256 over parameter names, shapes and bytes: the model's identity."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def fingerprint(model_digest: str, spec: TrainSpec, data: TrainingData, world: int = 1) -> dict:
    """What must match for a checkpoint to continue this run: every training setting under its own name
    (validate_every does not change training; the variants other than this one do not either)."""
    params = spec.train
    train = {k: v for k, v in dataclasses.asdict(params).items() if k not in ("variants", "validate_every", "loss")}
    return {
        "model": {"weights_sha256": model_digest},
        "data": {"examples_sha256": examples_digest(data.examples), "examples": len(data.examples)},
        "train": train,
        "variant": {"name": spec.name, **dataclasses.asdict(spec.variant)},
        "loss": params.loss,
        "world_size": world,
    }


def fingerprint_differences(saved: dict, current: dict) -> list[str]:
    a, b = dotted_items(saved), dotted_items(current)
    return [f"{k}: checkpoint {a.get(k, '<absent>')!r}, now {b.get(k, '<absent>')!r}"
            for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def rng_state() -> dict:
    """Every generator's state as tensors and ints only: ``state.pt`` loads with ``weights_only=True``."""
    version, mt, gauss = random.getstate()
    numpy = np.random.get_state(legacy=False)
    state = {
        "python": {"version": version, "mt": torch.tensor(mt, dtype=torch.int64), "gauss": gauss},
        "numpy": {"key": torch.from_numpy(numpy["state"]["key"].astype(np.int64)), "pos": int(numpy["state"]["pos"]),
                  "has_gauss": int(numpy["has_gauss"]), "gauss": float(numpy["gauss"])},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    py, npy = state["python"], state["numpy"]
    random.setstate((py["version"], tuple(int(x) for x in py["mt"].tolist()), py["gauss"]))
    np.random.set_state({"bit_generator": "MT19937", "state": {"key": npy["key"].numpy().astype(np.uint32),
                                                              "pos": npy["pos"]},
                         "has_gauss": npy["has_gauss"], "gauss": npy["gauss"]})
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: str | Path, state: dict) -> None:
    with atomic_path(path, kind=CHECKPOINT) as tmp:  # replaces only an earlier checkpoint
        torch.save(state, tmp)


def _first_sentence(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text.split(". ")[0][:160]


def _read(path: Path) -> dict:
    """``torch.load`` with ``weights_only=True``: tensors and plain data only, so a crafted pickle runs nothing."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(exc))
        if found:  # outside the allow-list: what a plain pickle load would have called
            raise InputError(f"refused: not only tensors and plain data (it names {found[1]}); loading it could "
                             "run code", str(path)) from None
        detail = re.search(r"WeightsUnpickler error:\s*(.+)", str(exc))
        raise InputError(f"unreadable checkpoint, corrupt or truncated ({detail[1] if detail else 'unpickling error'})",
                         str(path)) from None
    except (RuntimeError, EOFError, ValueError, OSError, KeyError, AttributeError) as exc:  # truncated, garbage
        raise InputError(f"unreadable checkpoint, corrupt or truncated ({type(exc).__name__}: "
                         f"{_first_sentence(exc)})", str(path)) from None
    if not isinstance(state, dict):
        raise InputError(f"not a training checkpoint (a {type(state).__name__}, not a mapping)", str(path))
    return state


def load_checkpoint(path: str | Path, current: dict | None = None) -> dict:
    """Read ``state.pt``; with ``current``, refuse a checkpoint of another model or config, naming the difference.

    Loads with ``weights_only=True`` (tensors, numbers, strings, lists, dicts): the file is
    never trusted to run code, whatever its fingerprint says.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("checkpoint not found", str(path))
    state = _read(path)
    missing = [k for k in STATE_KEYS if k not in state]
    if missing:
        raise InputError(f"not a training checkpoint (missing {', '.join(missing)})", str(path), field=missing[0])
    if state["format"] != FORMAT:
        raise InputError(f"checkpoint format {state['format']!r}, this version reads {FORMAT} (train again)",
                         str(path), field="format")
    if current is not None:
        diff = fingerprint_differences(state["fingerprint"], current)
        if diff:
            raise InputError(f"checkpoint made with a different model or config: {'; '.join(diff)}",
                             str(path), field="fingerprint")
    return state


def default_checkpoint(model_out: str | Path) -> Path:
    model_out = Path(model_out)
    return model_out.with_name(model_out.name + ".checkpoint") / "state.pt"
