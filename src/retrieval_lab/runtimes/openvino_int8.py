"""``dense.runtime: openvino_int8``: the OpenVINO runtime (openvino.py) with int8 linear layers: weights
compressed to int8 without data, inputs quantised per group at run time. Speed and nDCG@10 against fp32 and
sentence-transformers' int8 backends: docs/lab-notes.md (scripts/bench_encode.py)."""

from __future__ import annotations

from . import openvino


def compile(encoder, bf16: bool, threads: int) -> openvino.CompiledEncoder:
    return openvino.compile(encoder, bf16, threads, int8=True)
