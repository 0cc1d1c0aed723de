"""retrieval_lab.publishing.params_reference: docs/parameters.md is what the schema, params.yaml and dvc.yaml give."""

from __future__ import annotations

from beir_fixtures import REPO

from retrieval_lab.core import rules
from retrieval_lab.core.params import Params
from retrieval_lab.publishing import params_reference as ref


def test_the_committed_page_is_what_the_schema_gives():
    assert (REPO / ref.PAGE).read_text(encoding="utf-8") == ref.render(REPO), \
        "run python -m retrieval_lab.publishing.params_reference"


def test_every_key_of_params_yaml_has_a_row():
    import yaml

    page = (REPO / ref.PAGE).read_text(encoding="utf-8")

    def keys(tree, prefix=""):
        for k, v in tree.items():
            if isinstance(v, dict) and not prefix.endswith("dense.models."):
                yield from keys(v, f"{prefix}{k}.")
            else:
                yield f"{prefix}{k}"

    missing = [k for k in keys(yaml.safe_load((REPO / "params.yaml").read_text())) if f"| `{k}` |" not in page]
    assert not missing


def test_rules_are_described_from_the_rule_itself():
    assert ref.rule_text(rules.between(0.0, 1.0, True, True)) == "in (0.0, 1.0)"
    assert ref.rule_text(rules.POSITIVE) == "in [1, inf)"
    assert ref.rule_text(rules.one_of(("a", "b"))) == "one of `a`, `b`"
    assert ref.rule_text(rules.each(rules.MEASURE_NAME)) == "each item a measure name (e.g. nDCG@10)"
    assert ref.rule_text(rules.device) == "auto, cpu, cuda or cuda:N"
    assert ref.rule_text(None) == ""


def test_types_and_the_stages_that_read_a_key():
    import typing

    hints = typing.get_type_hints(Params)
    assert ref.type_name(typing.get_type_hints(hints["mine"])["margin"]) == "float | null"
    assert ref.type_name(typing.get_type_hints(hints["dense"])["models"]) == "dict[str, str]"
    dvc = {"vars": [{"lexical": {"bm25": {}, "lsa": {}}}],
           "stages": {"prepare": {"cmd": "x --raw data/raw/${dataset}", "params": ["prepare"]},
                      "retrieve": {"foreach": "${lexical}", "do": {"cmd": "r ${key}", "params": ["retrieve", "${key}"]}},
                      "mine": {"foreach": ["hard"], "do": {"cmd": "m runs/${mine.source}.trec", "params": [
                          {"params.yaml": ["mine.seed"]}]}}}}
    stages = ref._stage_params(dvc, {"dataset": "support", "mine": {"source": "dense"}})
    assert stages == {"prepare": ["dataset", "prepare"], "retrieve@bm25": ["retrieve", "bm25"],
                      "retrieve@lsa": ["retrieve", "lsa"], "mine@hard": ["mine.source", "mine.seed"]}
    assert ref.readers("bm25.k1", stages) == ["retrieve@bm25"]
    assert ref.readers("retrieve.depth", stages) == ["retrieve@bm25", "retrieve@lsa"]
    assert ref.readers("mine.count", stages) == []  # mine.seed and mine.source only, not the section
