from __future__ import annotations

import pytest
from beir_fixtures import REPO

from retrieval_lab.core.config import load_params
from retrieval_lab.core.errors import InputError


def test_repository_params_are_valid():
    params = load_params(REPO / "params.yaml")
    assert params.bm25.k1 == 1.2 and params.bm25.b == 0.75  # Lucene defaults
    assert set(params.train.variants) == {"hard", "random", "temperature"}


def test_unknown_key_is_an_error(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("bm25:\n  k1: 1.2\n  kl: 0.9\n")
    with pytest.raises(InputError) as info:
        load_params(path)
    assert info.value.field == "bm25.kl" and "unknown key" in str(info.value)


def test_wrong_type_is_an_error(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("retrieve:\n  depth: deep\n")
    with pytest.raises(InputError) as info:
        load_params(path)
    assert info.value.field == "retrieve.depth" and "expected an integer" in str(info.value)


def test_overrides_use_the_same_schema(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no params.yaml here: every default, then the overrides
    params = load_params(None, ["bm25.k1=0.9", "tokenizer.stopwords=null"])
    assert params.bm25.k1 == 0.9 and params.tokenizer.stopwords is None
    with pytest.raises(InputError):
        load_params(None, ["bm25.k1=fast"])


def test_a_named_params_file_must_exist(tmp_path):
    with pytest.raises(InputError) as info:
        load_params(tmp_path / "missing.yaml")
    assert info.value.path == str(tmp_path / "missing.yaml") and "not found" in str(info.value)
