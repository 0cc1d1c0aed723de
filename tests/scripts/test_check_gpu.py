"""scripts/check_gpu.py on the CPU (`--device cpu`): every check runs up to the CUDA calls and passes."""

from __future__ import annotations

import json

import pytest
from beir_fixtures import load_script, write_beir

TOPICS = ["vpn drops after sleep", "printer offline on wifi", "outlook search empty", "disk full on laptop",
          "badge reader rejects card", "teams camera black", "password expired on mac", "monitor flickers"]


@pytest.fixture(scope="module")
def check_gpu():
    yield from load_script("check_gpu")


def _beir(root):
    corpus = [{"_id": f"d{i}", "title": t, "text": f"how to fix {t}: restart, then update the driver"}
              for i, t in enumerate(TOPICS)] + [{"_id": f"x{i}", "title": "", "text": f"unrelated note {i}"}
                                                for i in range(8)]
    queries = [{"_id": f"q{i}", "text": f"my {t}"} for i, t in enumerate(TOPICS)]
    return write_beir(root, corpus, queries, {"train": [(f"q{i}", f"d{i}", 1) for i in range(6)],
                                              "test": [(f"q{i}", f"d{i}", 1) for i in (6, 7)]})


def test_every_check_runs_on_the_cpu_and_passes(check_gpu, tmp_path, capsys, monkeypatch):
    # any CPU: 10 short abstracts in bf16 are cheap even emulated, where the product refuses dense.bf16
    monkeypatch.setattr("retrieval_lab.encoder.native_bf16", lambda: True)
    data = _beir(tmp_path / "beir")
    out = tmp_path / "gpu.json"
    code = check_gpu.main(["--data", str(data), "--device", "cpu", "--docs", "10", "--steps", "6",
                           "--max-length", "32", "--peer-steps", "1", "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    report = json.loads(out.read_text())
    # CPU fp32 against itself is exact; bf16 autocast stays within the 0.995 bound
    assert report["encode"]["docs"] == 10 and report["encode"]["fp32_min_cosine"] == pytest.approx(1.0, abs=1e-6)
    assert 0.995 <= report["encode"]["bf16_min_cosine"] <= 1.0 + 1e-6
    # on the CPU the resumed run equals the straight one bit for bit, and 6 steps lower the loss
    assert report["train"]["max_loss_diff"] == 0.0 and report["train"]["max_param_diff"] == 0.0
    assert report["train"]["last_losses"] < report["train"]["first_losses"]
    assert report["faiss"] == {"queries": 2, "same_top10": 2, "passed": True}
    assert report["ddp"] == {"skipped": "0 GPU(s): needs 2"}
    assert report["encode_ddp"] == {"skipped": "0 GPU(s): needs 2"}
    assert "encode on 2 processes: skipped: 0 GPU(s): needs 2" in text
    # both trainers of the peers bench ran their steps on the device (6 train claims: batches of 6)
    peers = report["peers"]
    assert peers["ours"]["steps"] == 1 and peers["sentence_transformers"]["steps"] == 1 and peers["passed"]
    assert peers["ratio"] == pytest.approx(peers["ours"]["seconds_per_step"]
                                           / peers["sentence_transformers"]["seconds_per_step"])
    assert "no CUDA call was made" in text and text.rstrip().endswith("passed")


def test_cuda_without_a_gpu_says_so(check_gpu, tmp_path, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert check_gpu.main(["--data", str(_beir(tmp_path / "beir"))]) == 1
    assert "CUDA requested but torch sees no GPU" in capsys.readouterr().out
