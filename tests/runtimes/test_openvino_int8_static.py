"""dense.runtime openvino_int8_static: the network runs in int8 at scales calibrated on the support corpus, so
the rows move off f32's yet keep each text's direction; the calibration decides them (another set, other rows),
the same set gives the same bytes in a fresh encoder, nothing is printed, and a missing nncf is one line."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from training_fixtures import tiny_encoder

from retrieval_lab.core.errors import InputError
from retrieval_lab.runtimes import openvino_int8_static

pytest.importorskip("openvino", reason="the openvino extra is not installed")
pytest.importorskip("nncf", reason="the openvino extra is not installed")

LONG = "Mitochondria are the powerhouse of the cell and produce ATP through oxidative phosphorylation. " * 3
TEXTS = ["printer jams", LONG, "vpn drops when the laptop sleeps", "word " * 60, "disk full", LONG[:90]]


def test_static_int8_rows_follow_their_calibration_the_same_bytes_in_a_fresh_encoder(capfd, monkeypatch):
    f32 = tiny_encoder(dropout=0.0).encode(TEXTS, 4, 48, runtime="openvino")
    dynamic = tiny_encoder(dropout=0.0).encode(TEXTS, 4, 48, runtime="openvino_int8")
    enc = tiny_encoder(dropout=0.0)
    static = enc.encode(TEXTS, 4, 48, runtime="openvino_int8_static")
    assert capfd.readouterr().out == ""  # NNCF's tables and progress bars stay off stdout
    assert enc.last_truncated == 2
    assert np.abs(static - f32).max() > 1e-4 and np.abs(static - dynamic).max() > 1e-4  # activations in int8 too
    assert (static * f32).sum(axis=1).min() > 0.99
    assert np.allclose(np.linalg.norm(static, axis=1), 1.0, atol=1e-5)
    # the scales come from the calibration texts: calibrated on these six instead, other rows; the same six in
    # a fresh encoder, the same bytes (a small set: each calibration runs the network once per text)
    monkeypatch.setattr(openvino_int8_static, "calibration_texts", lambda: tuple(TEXTS))
    other = tiny_encoder(dropout=0.0).encode(TEXTS, 4, 48, runtime="openvino_int8_static")
    assert np.abs(other - static).max() > 1e-4
    assert np.array_equal(tiny_encoder(dropout=0.0).encode(TEXTS, 4, 48, runtime="openvino_int8_static"), other)


def test_the_calibration_is_the_support_corpus_whatever_the_params_file_says(tmp_path, monkeypatch):
    from retrieval_lab.core.params import GenerateParams
    from retrieval_lab.generate import generate

    texts = openvino_int8_static.calibration_texts()
    corpus = generate(GenerateParams()).corpus
    assert len(texts) == len(corpus) == 240
    assert texts == tuple(" ".join(v for v in (d.title, d.text) if v.strip()) for d in corpus.values())
    (tmp_path / "params.yaml").write_text("generate:\n  seed: 99\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # a user's params never reach it: the rows of a text are the same everywhere
    openvino_int8_static.calibration_texts.cache_clear()
    assert openvino_int8_static.calibration_texts() == texts


def test_without_nncf_it_says_so_in_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "nncf", None)
    with pytest.raises(InputError, match=r"openvino_int8_static needs the nncf package: pip install 'retrieval-lab\[openvino\]'"):
        tiny_encoder(dropout=0.0).encode(TEXTS, 4, 48, runtime="openvino_int8_static")
