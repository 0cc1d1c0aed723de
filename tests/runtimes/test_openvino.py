"""dense.runtime openvino: the encoder's network compiled by OpenVINO gives torch's embeddings (f32 to float
rounding, bf16 within bf16's step), the same bytes on every run, in input order, recompiled when the weights
change, and refused where it cannot run."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from training_fixtures import tiny_encoder

from retrieval_lab import encoder as E
from retrieval_lab.core.data import Dataset, Doc, Query
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import DenseParams

pytest.importorskip("openvino", reason="the openvino extra is not installed")

LOCK = Path(__file__).resolve().parents[2] / "models" / "base.lock.json"
LONG = "Mitochondria are the powerhouse of the cell and produce ATP through oxidative phosphorylation. " * 3
TEXTS = ["printer jams", LONG, "", "vpn drops when the laptop sleeps", "word " * 60, "disk full", LONG[:90], "wifi"]


def test_f32_gives_torchs_rows_in_input_order_the_same_bytes_each_run():
    enc = tiny_encoder(dropout=0.0)
    reference = enc.encode(TEXTS, 3, 48)  # batches of 3 over 8 texts: a short last batch, two in flight
    cut_by_torch = enc.last_truncated
    rows = enc.encode(TEXTS, 3, 48, runtime="openvino")
    assert rows.dtype == np.float32 and rows.shape == reference.shape
    assert np.abs(rows - reference).max() < 1e-5
    assert enc.last_truncated == cut_by_torch == 2  # LONG and "word " * 60 exceed 48 tokens
    assert np.array_equal(enc.encode(TEXTS, 3, 48, runtime="openvino"), rows)
    # every row is its own text's: a text encoded alone gives its row
    alone = enc.encode([TEXTS[3]], 3, 48, runtime="openvino")
    assert np.abs(alone[0] - rows[3]).max() < 1e-5
    assert enc.last_truncated == 0


def test_a_change_of_the_weights_recompiles():
    enc = tiny_encoder(dropout=0.0)
    before = enc.encode(TEXTS[:4], 2, 48, runtime="openvino")
    compiled = next(iter(enc._compiled.values()))
    enc.encode(TEXTS[:4], 2, 48, runtime="openvino")
    assert next(iter(enc._compiled.values())) is compiled  # unchanged weights: compiled once
    with torch.no_grad():
        enc.model.encoder.layer[0].output.dense.weight.mul_(3.0)  # an optimizer step changes weights in place
    after = enc.encode(TEXTS[:4], 2, 48, runtime="openvino")
    assert np.abs(after - before).max() > 1e-3
    assert np.abs(after - enc.encode(TEXTS[:4], 2, 48)).max() < 1e-5


def test_refused_where_it_cannot_run(monkeypatch):
    with pytest.raises(InputError, match=r"unknown value 'onnx' \(choices: torch, openvino, openvino_int8, openvino_int8_static\)"):
        DenseParams(runtime="onnx")
    with pytest.raises(InputError, match="dense.runtime openvino runs on the CPU, not on cuda"):
        DenseParams(runtime="openvino", device="cuda")
    enc = tiny_encoder(dropout=0.0)
    monkeypatch.setattr(E, "native_bf16", lambda: False)  # OpenVINO would compute f32 and say nothing
    with pytest.raises(InputError, match="dense.bf16 with dense.runtime openvino needs a CPU with AVX512-BF16"):
        enc.encode(TEXTS, 2, 48, bf16=True, runtime="openvino")
    enc.device = torch.device("cuda")  # device auto resolved to CUDA
    with pytest.raises(InputError, match="runs on the CPU; the encoder is on cuda"):
        enc.encode(TEXTS, 2, 48, runtime="openvino")


@pytest.mark.slow
def test_the_real_model_and_the_embeddings_report(capfd):
    """all-MiniLM-L6-v2: f32 within float rounding of torch; bf16 (where native) within bf16's step; the report
    says the runtime (and torch's report stays as it was); the conversion writes nothing to stderr."""
    import logging

    enc = E.load(LOCK, device="cpu")
    logging.Logger.warning_once.cache_clear()  # transformers warns once a process: as if this were the first
    dataset = Dataset(Path("mem"), {f"d{i}": Doc(f"d{i}", "", t) for i, t in enumerate(TEXTS)},
                      {"q1": Query("q1", "how do cells make energy?")}, {})
    torch_params = DenseParams(batch_size=4, max_seq_length=64)
    bf16 = E.native_bf16()
    params = DenseParams(batch_size=4, max_seq_length=64, runtime="openvino", bf16=bf16)
    reference = E.embed_dataset(enc, dataset, torch_params, ["title", "text"])
    compiled = E.embed_dataset(enc, dataset, params, ["title", "text"])
    assert "runtime" not in reference.report and compiled.report["runtime"] == "openvino"
    assert {k: v for k, v in compiled.report.items() if k not in ("runtime", "bf16")} == \
        {k: v for k, v in reference.report.items() if k != "bf16"}
    gap = np.abs(compiled.doc_embeddings - reference.doc_embeddings).max()
    # bf16 keeps 8 significant bits: rows move by about 1e-3 (and must move: the precision took effect)
    assert (1e-4 < gap < 1e-2) if bf16 else gap < 1e-5
    assert (compiled.doc_embeddings * reference.doc_embeddings).sum(axis=1).min() > 0.999
    assert "loss_type" not in capfd.readouterr().err  # the tracer reads the model's loss_function: kept quiet


_TELEMETRY_PROBE = """
import sys
from training_fixtures import tiny_encoder

enc = tiny_encoder(dropout=0.0)
enc.encode(["printer jams", "disk full"], 2, 16, runtime="openvino")
enc.encode(["printer jams", "disk full"], 2, 16, runtime="openvino_int8")  # NNCF compresses the weights
assert "nncf" in sys.modules
"""


def test_the_runtimes_send_no_telemetry_and_write_nothing_in_the_home_folder(tmp_path):
    """OpenVINO and NNCF send usage events to Google Analytics unless the user opted out, and keep a client id
    in ~/intel; a home folder without their consent file is such a user's. Encoding under openvino and
    openvino_int8 in a fresh interpreter leaves that home empty, while a bare `import openvino` there writes
    the client id (the premise: what the runtimes turn off is on by default)."""
    import subprocess
    import sys

    tests = Path(__file__).resolve().parents[1]
    env = {key: value for key, value in os.environ.items()
           if key not in {"CI", "TF_BUILD", "JENKINS_URL", "NNCF_CI", "NNCF_DEV"}}  # they turn telemetry off too
    homes = {name: tmp_path / name for name in ("bare", "ours")}
    for name, code in (("bare", "import openvino"), ("ours", _TELEMETRY_PROBE)):
        homes[name].mkdir()
        subprocess.run([sys.executable, "-c", code], env={**env, "HOME": str(homes[name]), "PYTHONPATH": str(tests)},
                       check=True, capture_output=True, timeout=300)
    assert (homes["bare"] / "intel" / "openvino_ga_cid").is_file()
    assert list(homes["ours"].iterdir()) == []
