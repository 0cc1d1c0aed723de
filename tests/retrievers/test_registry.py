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
