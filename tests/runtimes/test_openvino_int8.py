"""dense.runtime openvino_int8: int8 linear layers take effect (rows move off f32's) yet keep each text's
direction, give the same bytes on every run, print nothing (a command's stdout is its report), and say in one
line what is missing when nncf is not installed."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from training_fixtures import tiny_encoder

from retrieval_lab.core.errors import InputError

pytest.importorskip("openvino", reason="the openvino extra is not installed")
pytest.importorskip("nncf", reason="the openvino extra is not installed")

LONG = "Mitochondria are the powerhouse of the cell and produce ATP through oxidative phosphorylation. " * 3
TEXTS = ["printer jams", LONG, "vpn drops when the laptop sleeps", "word " * 60, "disk full", LONG[:90]]


def test_int8_moves_the_rows_a_little_the_same_bytes_each_run(capfd):
    enc = tiny_encoder(dropout=0.0)
    f32 = enc.encode(TEXTS, 4, 48, runtime="openvino")
    int8 = enc.encode(TEXTS, 4, 48, runtime="openvino_int8")
    assert capfd.readouterr().out == ""  # NNCF's summary table stays off stdout
    gap = np.abs(int8 - f32).max()
    assert gap > 1e-4  # the weights were compressed: not the f32 network again
    assert (int8 * f32).sum(axis=1).min() > 0.99
    assert np.allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(enc.encode(TEXTS, 4, 48, runtime="openvino_int8"), int8)
    assert enc.last_truncated == 2


def test_without_nncf_it_says_so_in_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "nncf", None)  # import nncf raises ImportError
    enc = tiny_encoder(dropout=0.0)
    with pytest.raises(InputError, match=r"openvino_int8 needs the nncf package: pip install 'retrieval-lab\[openvino\]'"):
        enc.encode(TEXTS, 4, 48, runtime="openvino_int8")
