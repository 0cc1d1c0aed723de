"""scripts/bench_encode.py's race: the peer's process protocol (scripts/_st_backends.py) gives the embeddings
sentence-transformers gives, its failures come back in one line, and the race picks each side's fastest path
within the quality bound."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from beir_fixtures import load_script

TEXTS = ["cells divide when the tumour grows", "a short claim", "vitamin D and bone density in adults"]


@pytest.fixture(scope="module")
def bench():
    yield from load_script("bench_encode")


@pytest.fixture(scope="module")
def backends():
    yield from load_script("_st_backends")


def test_the_peer_protocol_gives_sentence_transformers_embeddings(bench, backends, tmp_path, capsys):
    """prepare, then encode in the peer's way (texts as JSON in, .npy and one JSON line out), with the torch
    variant: it runs without optimum. Its rows equal our encoder's (the same model, length and pooling)."""
    from retrieval_lab.encoder import load
    from retrieval_lab.model_files import verify_lock

    folder = verify_lock(bench.LOCK)
    backends.main(["prepare", "--variant", "st-torch", "--model", str(folder), "--work", str(tmp_path)])
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["backend"] == "torch"
    (tmp_path / "texts.json").write_text(json.dumps(TEXTS), encoding="utf-8")
    backends.main(["encode", "--variant", "st-torch", "--work", str(tmp_path), "--texts", str(tmp_path / "texts.json"),
                   "--out", str(tmp_path / "e.npy"), "--batch-size", "2", "--max-length", str(bench.MAX_LENGTH)])
    row = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert row["contender"] == "st-torch" and row["docs_per_s"] == pytest.approx(3 / row["seconds"])
    ours = load(bench.LOCK, "cpu").encode(TEXTS, 2, bench.MAX_LENGTH)
    assert np.abs(np.load(tmp_path / "e.npy") - ours).max() < 1e-5
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in (tmp_path / "st-torch").iterdir()
                                                              if p.name != "bench-variant.json")


def test_a_peer_that_fails_says_why_in_one_line(bench):
    with pytest.raises(RuntimeError) as err:
        bench._peer_call(sys.executable, "encode", "--variant", "st-nothing", "--work", "w")
    message = str(err.value)
    assert "\n" not in message and "invalid choice: 'st-nothing'" in message and sys.executable in message


def _row(name: str, docs_per_s: float) -> dict:
    return {"contender": name, "docs_per_s": docs_per_s}


@pytest.fixture
def scored(bench, monkeypatch):
    """Five contenders with hand-set test nDCG@10: ours fp32 0.650, ours-bf16 0.6515 (+0.0015, within 0.002),
    st-onnx 0.6505, st-onnx-int8 0.6460 (-0.004: the fastest, outside the bound), st-openvino (slower than
    st-onnx, never scored: its value would fail the test)."""
    ndcg = {"ours": 0.650, "ours-bf16": 0.6515, "st-onnx": 0.6505, "st-onnx-int8": 0.646}
    monkeypatch.setattr(bench._bench, "isolated", lambda fn, *args, **_: (
        {"onnx": "loaded"} if fn is bench.backends_tried else {"contender": args[0], "nDCG@10": ndcg[args[0]]}))
    return [_row("ours", 20.0), _row("ours-bf16", 36.0), _row("st-onnx", 24.0), _row("st-onnx-int8", 48.0),
            _row("st-openvino", 22.0)]


def test_the_race_compares_the_fastest_within_the_bound(bench, scored):
    args = type("Args", (), {"score": True, "data": "d", "batch_size": 8, "device": "cpu", "peer_python": "py"})
    race = bench._race(scored, args)
    # int8 is the peer's fastest (48 docs/s) but 0.004 under fp32: the race is against st-onnx (24)
    assert (race["ours"], race["peer"], race["peer_any"]) == ("ours-bf16", "st-onnx", "st-onnx-int8")
    assert race["ratio"] == pytest.approx(36 / 24) and race["ratio_any"] == pytest.approx(36 / 48)
    assert race["met"] is True and race["judged"] is True
    assert [round(r["ndcg_gap"], 4) for r in scored[:4]] == [0.0, 0.0015, 0.0005, -0.004]
    assert "score" not in scored[4]  # scored from the fastest down: st-onnx already raced


def test_without_scores_the_race_is_speed_only_and_not_judged(bench, scored):
    args = type("Args", (), {"score": False, "data": "d", "batch_size": 8, "device": "cpu", "peer_python": "py"})
    race = bench._race(scored, args)
    assert (race["ours"], race["peer"], race["judged"]) == ("ours-bf16", "st-onnx-int8", False)
    assert race["ratio"] == pytest.approx(36 / 48) and "met" not in race


def test_ours_encodes_as_the_command_does_unless_asked_for_glibcs_defaults(bench, monkeypatch):
    """The encode command keeps freed memory for reuse (cli.main); ours in the race does too, and its embeddings
    do not depend on it. ``--glibc-defaults`` (an environment variable the contenders' processes inherit) leaves
    glibc as the peers run it."""
    from retrieval_lab.core import memory

    calls = []
    monkeypatch.setattr(memory, "keep_freed_memory", lambda: calls.append(1) or True)
    monkeypatch.delenv(bench.GLIBC_DEFAULTS, raising=False)
    kept = bench._ours_encode("cpu", 2, False)(TEXTS)
    assert calls == [1]
    monkeypatch.setenv(bench.GLIBC_DEFAULTS, "1")
    defaults = bench._ours_encode("cpu", 2, False)(TEXTS)
    assert calls == [1]
    np.testing.assert_array_equal(kept, defaults)
