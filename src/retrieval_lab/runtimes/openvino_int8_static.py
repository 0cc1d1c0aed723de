"""``dense.runtime: openvino_int8_static``: the OpenVINO runtime (openvino.py) with the network in int8, weights and
activations, at scales calibrated once on the embedded support corpus's documents (generated from the packaged
defaults: the same texts on every machine, for every collection, so a text's row never depends on what else is
encoded). The calibration set was chosen on SciFact validation, never on test: 240 generated documents kept
nDCG@10 within 0.002 of fp32 where 300 SciFact abstracts lost 0.009 (scripts/choose_int8_calibration.py,
docs/lab-notes.md)."""

from __future__ import annotations

import functools

from . import openvino


@functools.cache
def calibration_texts() -> tuple[str, ...]:
    """The documents of the embedded support corpus, title and text, in its order."""
    from ..core.params import GenerateParams
    from ..generate import generate

    return tuple(doc.content(["title", "text"]) for doc in generate(GenerateParams()).corpus.values())


def compile(encoder, bf16: bool, threads: int) -> openvino.CompiledEncoder:
    return openvino.compile(encoder, bf16, threads, calibration=list(calibration_texts()))
