import numpy as np
import pytest

from retrieval_lab import retrievers
from retrieval_lab.core.errors import InputError
from retrieval_lab.retrievers.base import top_k


def test_registry_resolves_every_name():
    assert retrievers.names() == ["bm25", "dense", "external", "lsa"]
    for name in retrievers.names():
        assert retrievers.get(name).name == name


def test_unknown_retriever_lists_choices():
    with pytest.raises(InputError, match=r"choices: bm25, dense, external, lsa") as err:
        retrievers.get("splade")
    assert err.value.field == "--retriever"


def test_top_k_cuts_ties_by_doc_id_descending():
    ids = ["a", "b", "c", "d", "e"]
    scores = np.array([0.5, 0.9, 0.5, 0.5, 0.0])
    # b first; the three 0.5 ties in trec order (doc id descending) are d, c, a; depth 3 keeps d, c
    assert list(top_k(scores, ids, 3, positive_only=False).items()) == [("b", 0.9), ("d", 0.5), ("c", 0.5)]


def test_top_k_positive_only_drops_zero_and_negative():
    ids = ["a", "b", "c"]
    scores = np.array([0.0, -1.0, 2.0])
    assert top_k(scores, ids, 10, positive_only=True) == {"c": 2.0}
    assert list(top_k(scores, ids, 10, positive_only=False)) == ["c", "a", "b"]


def test_top_k_is_the_trec_eval_order_of_everything_cut_at_depth():
    """Against a plain sort of every (document, score) by score then id, descending: random scores with many ties
    (at the cut too), some not positive, rows or none, depths below and above the candidates (the cut's lower
    bound from the first 4 x depth scores and the tie runs sorted by id must change nothing)."""
    rng = np.random.default_rng(7)
    for _ in range(3000):
        n, depth = int(rng.integers(0, 80)), int(rng.integers(1, 25))
        scores = rng.integers(-2, int(rng.integers(1, 9)), n) * rng.choice([1.0, 0.37, 1e-300])
        if rng.random() < 0.4:
            scores = scores + (rng.random(n) < 0.5) * rng.random(n)
        ids = [f"d{i}" for i in rng.permutation(1000)[:n]]
        rows = rng.permutation(n) if rng.random() < 0.5 else None
        positive_only = bool(rng.random() < 0.8)
        owner = range(n) if rows is None else rows.tolist()
        pairs = [(ids[j], float(s)) for j, s in zip(owner, scores) if s > 0 or not positive_only]
        expected = sorted(pairs, key=lambda item: (item[1], item[0]), reverse=True)[:depth]
        assert list(top_k(scores, ids, depth, positive_only, rows).items()) == expected
