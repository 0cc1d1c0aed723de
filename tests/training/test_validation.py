"""training.validation: an encoder ranked in memory and measured by the metrics engine."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_lab.core.params import Params
from retrieval_lab.training.validation import Candidates, _top_stable, dense_means


def test_dense_means_ranks_by_dot_product():
    vectors = {"q1": [1.0, 0.0], "q2": [0.0, 1.0], "a": [0.9, 0.1], "b": [0.2, 0.8], "c": [0.6, 0.4]}

    class Fixed:  # text -> a fixed 2-d embedding
        def encode(self, texts, batch_size, max_length, bf16):
            return np.array([vectors[t] for t in texts], dtype=np.float32)

    qrels = {"q1": {"c": 1}, "q2": {"b": 1}}
    means = dense_means(Fixed(), qrels, {"q1": "q1", "q2": "q2"}, {"a": "a", "b": "b", "c": "c"},
                        Params().dense, depth=2, measures=["RR", "R@1", "R@2"])
    # q1 scores a 0.9, c 0.6, b 0.2: c at rank 2 -> RR 1/2; q2 scores b 0.8 first -> RR 1
    assert means == pytest.approx({"RR": 0.75, "R@1": 0.5, "R@2": 1.0})
    # depth 1 cuts q1's list before c: RR 0 for it
    assert dense_means(Fixed(), qrels, {"q1": "q1", "q2": "q2"}, {"a": "a", "b": "b", "c": "c"},
                       Params().dense, depth=1, measures=["RR"])["RR"] == pytest.approx(0.5)


def test_top_stable_is_a_stable_sorts_first_k():
    rng = np.random.default_rng(0)
    for n, k in [(1, 1), (10, 3), (50, 50), (200, 17)]:
        row = rng.choice([0.1, 0.2, 0.3, -0.4], size=n).astype(np.float32)  # ties everywhere
        expected = np.argsort(-row, kind="stable")[:k]
        assert _top_stable(row, k).tolist() == expected.tolist()


def test_candidates_are_fixed_by_the_first_validation_and_measure_it_too():
    # 2-d embeddings; q1 = (1, 0), q2 = (0, 1). The "base" weights rank q1: a .9, c .6, b .2, d .1 and
    # q2: d .95, b .8, c .4, a .1; top 1 each -> candidates {a, d}, in corpus order a, d.
    base = {"q1": [1.0, 0.0], "q2": [0.0, 1.0], "a": [0.9, 0.1], "b": [0.2, 0.8], "c": [0.6, 0.4],
            "d": [0.1, 0.95]}
    later = {**base, "b": [0.3, 0.99], "c": [0.99, 0.0]}  # "trained" weights: b and c now lead

    class Fixed:
        def __init__(self, vectors):
            self.vectors, self.encoded = vectors, []

        def encode(self, texts, batch_size, max_length, bf16):
            self.encoded.append(list(texts))
            return np.array([self.vectors[t] for t in texts], dtype=np.float32)

    qrels = {"q1": {"c": 1}, "q2": {"b": 1}}
    queries, docs = {"q1": "q1", "q2": "q2"}, {d: d for d in "abcd"}
    candidates = Candidates(per_query=1)
    first = Fixed(base)
    means = dense_means(first, qrels, queries, docs, Params().dense, depth=10, measures=["RR", "R@2"],
                        candidates=candidates)
    assert candidates.ids == ["a", "d"]
    assert first.encoded[1] == ["a", "b", "c", "d"]  # the first validation encodes the corpus once ...
    assert means == pytest.approx({"RR": 0.0, "R@2": 0.0})  # ... and is measured on {a, d}: c and b absent
    second = Fixed(later)
    means = dense_means(second, qrels, queries, docs, Params().dense, depth=10, measures=["RR"],
                        candidates=candidates)
    assert second.encoded[1] == ["a", "d"]  # later ones encode only the candidates
    assert means == pytest.approx({"RR": 0.0})  # b and c lead the corpus now, but are no candidates
    # over the whole corpus the later weights put c first for q1 and b first for q2
    assert dense_means(Fixed(later), qrels, queries, docs, Params().dense, depth=10,
                       measures=["RR"]) == pytest.approx({"RR": 1.0})
