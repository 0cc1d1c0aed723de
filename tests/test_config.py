from __future__ import annotations

import dataclasses
import typing

import pytest
from beir_fixtures import REPO

from retrieval_lab.core.config import Params, load_params
from retrieval_lab.core.errors import InputError


def test_repository_params_are_valid():
    params = load_params(REPO / "params.yaml")
    assert params.bm25.k1 == 1.2 and params.bm25.b == 0.75  # Lucene defaults
    assert set(params.train.variants) == {"hard", "random", "temperature", "query"}
    assert params.train.variants["query"].side == "query" and params.train.variants["hard"].side == "both"


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


def test_override_value_is_yaml_when_it_parses_else_the_raw_string(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = load_params(None, ["tokenizer.pattern=[a-z0-9]+", "bm25.k1=0.9", "retrieve.fields=[text]",
                                "mine.margin=null"])
    # "[a-z0-9]+" is not YAML (an unclosed flow sequence): it stays the string typed
    assert params.tokenizer.pattern == "[a-z0-9]+" and params.bm25.k1 == 0.9
    assert params.retrieve.fields == ["text"] and params.mine.margin is None


@pytest.mark.parametrize("spelling", ["none", "None", "NONE", "null", "~"])
def test_none_turns_off_stemmer_and_stopwords(spelling, tmp_path, monkeypatch):
    from retrieval_lab.tokenizer import Tokenizer

    monkeypatch.chdir(tmp_path)
    params = load_params(None, [f"tokenizer.stemmer={spelling}", f"tokenizer.stopwords={spelling}"])
    assert params.tokenizer.stemmer is None and params.tokenizer.stopwords is None
    # defaults would give ["run", "cat"] (stemmed, "the" a stopword); turned off: the lowercased tokens
    assert Tokenizer(params.tokenizer).tokenize("The running Cats") == ["the", "running", "cats"]


def schema_keys(cls, prefix: str = "") -> list[str]:
    """Every leaf key of the params schema, from the dataclasses themselves (mappings: their default names)."""
    keys = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = f"{prefix}.{f.name}" if prefix else f.name
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            keys += schema_keys(tp, key)
        elif typing.get_origin(tp) is dict and dataclasses.is_dataclass(typing.get_args(tp)[1]):
            for name in getattr(cls(), f.name):
                keys += schema_keys(typing.get_args(tp)[1], f"{key}.{name}")
        else:
            keys.append(key)
    return keys


# Wrong for every key: not YAML (kept as raw strings, which no string setting accepts: not a name,
# a regex, a language, a choice, a file or a measure) or a negative number (no count, ratio, seed
# or weight may be one; strings, lists and mappings refuse a number)
MALFORMED = ["{bad: [", "[", "*no_anchor", "-3"]
KEYS = schema_keys(Params)


def test_the_walk_covers_the_schema():
    assert len(KEYS) > 60 and {"tokenizer.pattern", "train.variants.hard.temperature", "dense.lock"} <= set(KEYS)


@pytest.mark.parametrize("key", KEYS)
def test_every_key_refuses_a_malformed_value_in_one_line(key, tmp_path, monkeypatch, capsys):
    from beir_fixtures import write_beir

    from retrieval_lab import cli, encoder

    monkeypatch.chdir(tmp_path)  # no params.yaml: the defaults, then the one override
    monkeypatch.setattr(encoder, "load", lambda *a, **k: pytest.fail("every bad value is refused before a model loads")
                        if key != "dense.lock" else encoder.resolve_model(a[0], a[2]))
    beir = write_beir(tmp_path / "beir", [{"_id": "d1", "title": "", "text": "x"}], [{"_id": "q1", "text": "x"}],
                      {"test": [("q1", "d1", 1)]})
    for value in MALFORMED:
        code = cli.main(["encode", "--dataset", str(beir), "--output", str(tmp_path / "out"),
                         "--set", f"{key}={value}"])
        err = capsys.readouterr().err
        assert code == 2, (value, err)
        assert err.startswith("error: ") and err.count("\n") == 1, (value, err)
        assert f"field '{key}'" in err, (value, err)
    assert not (tmp_path / "out").exists()


def test_variant_side_and_epochs_are_checked(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("train: {variants: {q: {negatives: hard, side: queries}}}\n")
    with pytest.raises(InputError, match=r"train.variants.q.side.*unknown value 'queries' \(choices: both, query\)"):
        load_params(path)
    path.write_text("train: {variants: {q: {negatives: hard, side: query, epochs: 0}}}\n")
    with pytest.raises(InputError, match="train.variants.q.epochs"):
        load_params(path)
