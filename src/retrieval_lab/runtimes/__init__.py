"""Encoder runtimes: what runs the network of :class:`retrieval_lab.encoder.Encoder` at inference
(``dense.runtime``). ``torch`` is the encoder's own forward pass (encoder.py); every other runtime is one module
here with a ``compile(encoder, bf16, threads)`` returning an object whose ``encode(texts, batch_size,
max_length)`` gives ``(float32 [n, H] unit rows, texts truncated)``. Training always runs on torch."""

from __future__ import annotations

import importlib

from ..core.params import ENCODER_RUNTIMES


def compiled(name: str, encoder, bf16: bool, threads: int):
    """The encoder's network compiled by runtime ``name`` (not ``torch``)."""
    if name not in ENCODER_RUNTIMES or name == "torch":
        raise ValueError(f"unknown encoder runtime {name!r} (choices: {', '.join(ENCODER_RUNTIMES)})")
    return importlib.import_module(f"{__name__}.{name}").compile(encoder, bf16, threads)
