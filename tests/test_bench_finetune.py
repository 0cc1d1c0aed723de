"""scripts/bench_finetune.py: the peer recipe's negatives (no model is trained here)."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter

import pytest
from beir_fixtures import REPO, write_beir

from retrieval_lab.runs import write_run


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(REPO / "scripts"))  # for its `import _bench`
    spec = importlib.util.spec_from_file_location("bench_finetune", REPO / "scripts" / "bench_finetune.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.path.remove(str(REPO / "scripts"))


def _fixture(tmp_path):
    corpus = [{"_id": f"d{i}", "title": "", "text": f"doc {i}"} for i in range(20)]
    queries = [{"_id": q, "text": q} for q in ("qa", "qb", "qt")]
    # qa has two positives (d0, d2); d1 is relevant to test query qt, so never a negative
    data = write_beir(tmp_path / "beir", corpus, queries,
                      {"train": [("qa", "d0", 1), ("qa", "d2", 1), ("qb", "d5", 1)], "test": [("qt", "d1", 1)]})
    # the base run ranks d0, d1, ..., d19 for every query (score falls with the number)
    ranking = {f"d{i}": 1.0 - i / 100 for i in range(20)}
    write_run(tmp_path / "dense.trec", {"qa": ranking, "qb": ranking, "qt": ranking}, "dense")
    return str(data), str(tmp_path / "dense.trec")


def test_one_negative_per_pair_from_the_rank_window(bench, tmp_path):
    data, run = _fixture(tmp_path)
    triples = bench.mined_pairs(data, run, seed=3, range_min=4, range_max=6)
    assert [(q, p) for q, p, _ in triples] == [("qa", "d0"), ("qa", "d2"), ("qb", "d5")]
    # qa: d0, d1 (test positive) and d2 leave d3, d4, d5, d6, ...: ranks 4-6 are d6, d7, d8
    # qb: d1 (test positive) and d5 leave d0, d2, d3, d4, d6, d7, ...: ranks 4-6 are d4, d6, d7
    assert triples[0][2] in {"d6", "d7", "d8"} and triples[1][2] in {"d6", "d7", "d8"}
    assert triples[2][2] in {"d4", "d6", "d7"}
    assert bench.mined_pairs(data, run, seed=3, range_min=4, range_max=6) == triples  # seeded


def test_every_window_document_is_drawn(bench, tmp_path):
    data, run = _fixture(tmp_path)
    drawn = Counter(bench.mined_pairs(data, run, seed=s, range_min=4, range_max=6)[2][2] for s in range(60))
    assert set(drawn) == {"d4", "d6", "d7"}  # P(a given one missing in 60 draws) = (2/3)^60 ~ 3e-11
