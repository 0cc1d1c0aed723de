"""training.validation: an encoder ranked in memory and measured by the metrics engine."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_lab.core.params import Params
from retrieval_lab.training.validation import _top_stable, dense_means


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
