"""dvc.yaml's names block: written from checked params, the only place dvc.yaml takes a name from."""

from __future__ import annotations

import re

import pytest
import yaml
from beir_fixtures import REPO

from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params_file import load_params, params_from_dict
from retrieval_lab.pipeline_names import PipelineNames, declared, differences, fill, names_of, render

PARAMS = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))


def test_the_committed_dvc_yaml_holds_the_names_of_params_yaml():
    text = (REPO / "dvc.yaml").read_text(encoding="utf-8")
    names = names_of(load_params(REPO / "params.yaml"))
    assert declared(text, "dvc.yaml") == names
    assert fill(text, names, "dvc.yaml") == text  # the block is exactly what `retrieval-lab names` writes
    assert names == PipelineNames(
        dataset="support", dense={"dense": "models/base.lock.json"},
        train={"hard": {"negatives": "hard"}, "random": {"negatives": "random"},
               "temperature": {"negatives": "hard"}, "query": {"negatives": "hard"}},
        mine=["hard", "random"], fusion={"rrf": {}, "weighted": {}}, external={},
        uses={"fusion": {"dense": "dense-ft-query"}, "mine": {"source": "dense"}, "train": {"base": "dense"}},
        compare="bm25 dense dense-ft-hard dense-ft-query fused-rrf fused-weighted")


def test_the_compare_stage_reads_the_runs_its_pairs_name(tmp_path, capsys):
    # issue 51: compare read a fixed list of runs, so a pipeline whose pairs named others failed at its last stage
    from retrieval_lab import cli
    from retrieval_lab.pipeline_names import COMPARE_BEGIN, COMPARE_END

    (tmp_path / "dvc.yaml").write_bytes((REPO / "dvc.yaml").read_bytes())
    edited = {**PARAMS, "compare": {**PARAMS["compare"], "pairs": [["bm25", "recipes"]]},
              "external": {"recipes": {"path": "retriever", "callable": "recipe_search:search"}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(edited), encoding="utf-8")
    argv = ["--dvc-yaml", str(tmp_path / "dvc.yaml"), "--params", str(tmp_path / "params.yaml")]
    assert cli.main(["names", "--check", *argv]) == 2
    assert "compare.pairs names the runs 'bm25 recipes'" in capsys.readouterr().err
    assert cli.main(["names", *argv]) == 0
    text = (tmp_path / "dvc.yaml").read_text(encoding="utf-8")
    block = text[text.index(COMPARE_BEGIN):text.index(COMPARE_END)].splitlines()[1:]
    assert block == [f"      - {p}" for p in (
        "reports/${names.dataset}/bm25/per_query.json", "reports/${names.dataset}/recipes/per_query.json",
        "reports/${names.dataset}/bm25/diagnosis.json", "reports/${names.dataset}/recipes/diagnosis.json",
        "runs/${names.dataset}/bm25.trec", "runs/${names.dataset}/recipes.trec")]
    assert "compare: bm25 recipes" in text and cli.main(["names", "--check", *argv]) == 0
    # a hand edit of the generated inputs is found by the names stage
    (tmp_path / "dvc.yaml").write_text(text.replace("      - runs/${names.dataset}/recipes.trec\n", ""))
    assert cli.main(["names", "--check", *argv]) == 2
    assert "the compare stage's generated inputs are not the files" in capsys.readouterr().err


def test_without_training_variants_nothing_is_mined():
    # issue 51: a collection with test judgments alone needs no training stage, so none is declared
    params = params_from_dict({**PARAMS, "train": {**PARAMS.get("train", {}), "variants": {}}})
    assert names_of(params).mine == [] and names_of(params).train == {}


def _interpolations(node, where: str = ""):
    """(where, expression) for every ``${...}`` in a YAML tree (keys and values)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _interpolations(key, where)
            yield from _interpolations(value, f"{where}.{key}")
    elif isinstance(node, list):
        for item in node:
            yield from _interpolations(item, where)
    elif isinstance(node, str):
        yield from ((where, m) for m in re.findall(r"\$\{([^}]+)\}", node))


def test_no_output_path_and_no_foreach_takes_a_value_from_params_yaml():
    # what DVC removes before a stage's command runs (outs, metrics, plots) and the lists stages are made
    # from may read only the names block, a foreach's key and item, or the lexical table of dvc.yaml itself
    pipeline = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))
    checked = 0
    for name, stage in pipeline["stages"].items():
        body = stage.get("do", stage)
        over = stage.get("foreach")
        if isinstance(over, str):
            assert re.fullmatch(r"\$\{(names\.\w+|lexical)\}", over), f"{name}: foreach over {over}"
        for kind in ("outs", "metrics", "plots"):
            for where, expr in _interpolations(body.get(kind, []), f"{name}.{kind}"):
                assert expr.startswith(("names.", "item.")) or expr in ("key", "item"), \
                    f"{where}: ${{{expr}}} comes from params.yaml"
                checked += 1
    assert checked > 100


def test_differences_name_what_params_says_and_the_block_does_not():
    have = names_of(params_from_dict(PARAMS))
    edited = yaml.safe_load(yaml.safe_dump(PARAMS))
    edited["dataset"] = "scifact"
    edited["train"]["variants"]["warm"] = {"negatives": "random"}
    edited["train"]["variants"].pop("random")
    edited["train"]["variants"]["hard"]["negatives"] = "random"
    edited["fusion"]["methods"].pop("weighted")
    edited["dense"]["models"]["dense"] = "models/other.lock.json"
    want = names_of(params_from_dict(edited))
    assert differences(have, want) == [
        "dataset is 'scifact' in params.yaml, 'support' in dvc.yaml",
        "dense.models changes 'dense'",
        "train.variants adds 'warm' and drops 'random' and changes 'hard'",
        "fusion.methods drops 'weighted'",
    ]
    assert differences(want, want) == [] and differences(None, want) == ["the names block is empty"]


def test_a_block_round_trips_and_a_broken_one_is_named():
    names = names_of(params_from_dict(PARAMS))
    text = "vars:\n" + render(names) + "stages: {}\n"
    assert declared(text, "p.yaml") == names
    assert yaml.safe_load(text)["vars"] == [{"names": {
        "dataset": "support", "dense": {"dense": "models/base.lock.json"},
        "train": {v: {"negatives": n} for v, n in [("hard", "hard"), ("random", "random"), ("temperature", "hard"),
                                                   ("query", "hard")]},
        "mine": ["hard", "random"], "fusion": {"rrf": {}, "weighted": {}}, "external": {},
        "uses": {"fusion": {"dense": "dense-ft-query"}, "mine": {"source": "dense"}, "train": {"base": "dense"}},
        "compare": "bm25 dense dense-ft-hard dense-ft-query fused-rrf fused-weighted"}}]
    with pytest.raises(InputError, match="p.yaml: expected one '# BEGIN generated names' line"):
        declared("vars:\n  # END generated names\n", "p.yaml")
    broken = "vars:\n  # BEGIN generated names\n  - names: {dataset: x}\n  # END generated names\n"
    with pytest.raises(InputError, match=r"p.yaml:2: the names block is not one 'names' entry"):
        declared(broken, "p.yaml")
    unclosed = "vars:\n  # BEGIN generated names\n  - names: [unclosed\n  # END generated names\n"
    with pytest.raises(InputError) as info:
        declared(unclosed, "p.yaml")
    assert "\n" not in str(info.value) and str(info.value).startswith("p.yaml:3: the names block is not YAML"), \
        str(info.value)
