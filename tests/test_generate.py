"""The generated IT-support knowledge base: determinism, relevance contract, sizes, difficulty."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
from collections import Counter

import pytest
from beir_fixtures import default_params

from retrieval_lab import cli
from retrieval_lab import generate as gen
from retrieval_lab.commands import generate as command
from retrieval_lab.core.atomic import MARKER, MARKER_TEXT
from retrieval_lab.core.data import load_dataset
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import GenerateParams, TokenizerParams
from retrieval_lab.tokenizer import Tokenizer

FILES = ("corpus.jsonl", "queries.jsonl", "qrels/all.tsv")
# sha256 of the files for GenerateParams() (seed 13, 40 families, 2 confusables, 80 generic,
# 5 queries per family, difficulty 0.5). Recompute only when changing the generator on purpose.
GOLDEN = {
    "corpus.jsonl": "30aaa1cd397ac46ca762034236ab47ccb8731c02e8a65a00ba1ae6e04df419e1",
    "queries.jsonl": "2c0b9356b1c88909d971d4ffd502b0138fe445d2829347c2d1c2e34b4a6e9e3c",
    "qrels/all.tsv": "838eb6253db2d110990d7be069f4aa365c66bd8bf474daef4d4ec9b73891120e",
}
SMALL = GenerateParams(seed=3, families=7, confusables_per_family=1, generic_docs=5,
                       queries_per_family=3)
FAMILY = {f.id: f for f in gen.FAMILIES}
CUE = {c.title: c.cue for f in gen.FAMILIES for c in f.confusables}


def _write(params: GenerateParams, out) -> dict[str, bytes]:
    gen.write_generated(out, gen.generate(params))
    return {name: (out / name).read_bytes() for name in FILES}


def test_same_seed_gives_identical_bytes_and_the_golden_hashes(tmp_path):
    first = _write(GenerateParams(), tmp_path / "a")
    second = _write(GenerateParams(), tmp_path / "b")
    assert first == second
    assert {name: hashlib.sha256(data).hexdigest() for name, data in first.items()} == GOLDEN


def test_different_seed_gives_different_files(tmp_path):
    base = _write(GenerateParams(seed=13), tmp_path / "a")
    other = _write(GenerateParams(seed=14), tmp_path / "b")
    for name in FILES:
        assert base[name] != other[name], name


def test_every_query_has_exactly_the_two_procedures_of_its_family_as_positives():
    data = gen.generate(GenerateParams())
    for qid, judged in data.qrels.items():
        family = data.queries[qid].family
        # primary 2 + alternative 1 + confusables_per_family (2) judged 0
        assert sorted(judged.values()) == [0, 0, 1, 2], qid
        by_grade = {}
        for did, rel in judged.items():
            doc = data.corpus[did]
            assert doc.family == family
            assert doc.metadata["kind"] == ("procedure" if rel > 0 else "confusable")
            by_grade.setdefault(rel, []).append(doc.title)
        assert by_grade[2] == [FAMILY[family].primary.title]
        assert by_grade[1] == [FAMILY[family].alternative.title]
    # each procedure and confusable is judged for every query of its family; generic docs never
    per_family = Counter(q.family for q in data.queries.values())
    judged_times = Counter(did for judged in data.qrels.values() for did in judged)
    for did, doc in data.corpus.items():
        expected = 0 if doc.metadata["kind"] == "generic" else per_family[doc.family]
        assert judged_times[did] == expected, did


@pytest.mark.parametrize("params", [GenerateParams(), SMALL], ids=["default", "small"])
def test_counts_match_params(params):
    data = gen.generate(params)
    kinds = Counter(d.metadata["kind"] for d in data.corpus.values())
    assert kinds == {"procedure": 2 * params.families,
                     "confusable": params.confusables_per_family * params.families,
                     "generic": params.generic_docs}
    # default: 40 * (2 + 2) + 80 = 240 documents and 40 * 5 = 200 queries
    expected_docs = params.families * (2 + params.confusables_per_family) + params.generic_docs
    assert len(data.corpus) == expected_docs
    assert len(data.queries) == params.families * params.queries_per_family
    per_family = Counter(q.family for q in data.queries.values())
    assert set(per_family.values()) == {params.queries_per_family}
    assert len({q.text for q in data.queries.values()}) == len(data.queries)  # no duplicates
    assert len({(d.title, d.text) for d in data.corpus.values()}) == len(data.corpus)


def test_command_output_passes_the_loader_and_replaces_the_folder_whole(tmp_path):
    out = tmp_path / "support"
    out.mkdir()
    (out / "stale.txt").write_text("from an older run")
    (out / MARKER).write_text(MARKER_TEXT)  # an older run's folder: generate may replace it
    parser = argparse.ArgumentParser()
    command.configure(parser)
    args = parser.parse_args(["--output", str(out), "--params", str(default_params(tmp_path)),
                              "--set", "generate.families=7",
                              "--set", "generate.queries_per_family=3"])
    assert command.run(args) == 0
    assert cli.COMMANDS["generate"] == "generate"

    dataset = load_dataset(out, splits=["all"])
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "corpus.jsonl", "qrels", "queries.jsonl"]
    # 7 families * (2 procedures + 2 confusables) + 80 generic = 108 documents; 7 * 3 = 21 queries
    assert dataset.report["documents"] == 108
    assert dataset.report["splits"]["all"] == {
        "judged_queries": 21, "queries_without_positive": 0, "queries_without_positive_ids": [],
        "judgments": 21 * 4}
    assert (out / "qrels" / "all.tsv").read_text().splitlines()[0] == "query-id\tcorpus-id\tscore"
    for doc in dataset.corpus.values():
        assert set(doc.metadata) == {"family", "kind", "component"}
        assert doc.metadata["component"] in set(gen.COMPONENTS) | {"general"}
        assert (doc.family is None) == (doc.metadata["kind"] == "generic")


def test_a_failed_write_leaves_the_old_folder_and_no_temporary(tmp_path, monkeypatch):
    out = tmp_path / "support"
    before = _write(SMALL, out)

    def broken(path, qrels):
        raise OSError("disk full")

    monkeypatch.setattr(gen, "write_qrels", broken)
    with pytest.raises(OSError):
        gen.write_generated(out, gen.generate(GenerateParams()))
    assert {name: (out / name).read_bytes() for name in FILES} == before
    assert [p.name for p in tmp_path.iterdir()] == ["support"]


@pytest.mark.parametrize("key, value", [
    ("families", 41), ("confusables_per_family", 4), ("queries_per_family", 25), ("generic_docs", 1000)])
def test_sizes_beyond_the_catalogue_are_errors_naming_the_field(key, value):
    with pytest.raises(InputError) as info:
        gen.generate(dataclasses.replace(GenerateParams(), **{key: value}), "params.yaml")
    assert info.value.field == f"generate.{key}"
    assert str(info.value).startswith(f"params.yaml field 'generate.{key}'")


@pytest.mark.parametrize("key, value, reason", [
    ("families", 0, "must lie in [1, inf), got 0"), ("difficulty", 1.5, "must lie in [0.0, 1.0], got 1.5")])
def test_values_outside_the_schema_never_reach_generate(key, value, reason):
    with pytest.raises(InputError) as info:
        dataclasses.replace(GenerateParams(), **{key: value})
    assert (info.value.field, info.value.reason) == (f"generate.{key}", reason)


def test_queries_borrow_the_words_of_a_confusable_judged_non_relevant():
    for difficulty, style, cues in ((0.0, "lexical", 0), (1.0, "paraphrase", 200)):
        data = gen.generate(GenerateParams(difficulty=difficulty))
        queries = data.queries.values()
        assert Counter(q.metadata["style"] for q in queries) == {style: 200}
        assert sum(q.metadata["cue"] is not None for q in queries) == cues
        for q in queries:
            if q.metadata["cue"]:
                wrong = {CUE[data.corpus[d].title] for d, r in data.qrels[q.id].items() if r == 0}
                assert q.metadata["cue"] in wrong
                assert q.metadata["cue"] in q.text


def _overlap(params: GenerateParams) -> float:
    """Mean over queries of |query tokens ∩ tokens of its two positives| / |query tokens|."""
    tokenize = Tokenizer(TokenizerParams())
    data = gen.generate(params)
    shares = []
    for qid, judged in data.qrels.items():
        positives = [data.corpus[d].content() for d, r in judged.items() if r > 0]
        positive_tokens = set().union(*map(tokenize, positives))
        query_tokens = set(tokenize(data.queries[qid].text))
        shares.append(len(query_tokens & positive_tokens) / len(query_tokens))
    return sum(shares) / len(shares)


def test_vocabulary_gap_grows_with_difficulty():
    overlaps = [_overlap(GenerateParams(difficulty=d)) for d in (0.0, 0.5, 1.0)]
    # measured: 0.777, 0.417, 0.172 (stemmed tokens, stopwords removed)
    assert overlaps[0] > 0.7 and overlaps[2] < 0.25
    assert overlaps[0] > overlaps[1] > overlaps[2]


def test_bm25_finds_the_default_data_neither_trivial_nor_hopeless():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rank_bm25 = pytest.importorskip("rank_bm25")
    tokenize = Tokenizer(TokenizerParams())

    def ndcg10(params: GenerateParams) -> float:
        data = gen.generate(params)
        ids = list(data.corpus)
        bm25 = rank_bm25.BM25Okapi([tokenize(data.corpus[d].content()) for d in ids])
        run = {}
        for qid, query in data.queries.items():
            scores = bm25.get_scores(tokenize(query.text))
            run[qid] = {d: float(s) for d, s in zip(ids, scores)}
        evaluator = pytrec_eval.RelevanceEvaluator(data.qrels, {"ndcg_cut.10"})
        per_query = evaluator.evaluate(run)
        return sum(m["ndcg_cut_10"] for m in per_query.values()) / len(per_query)

    # measured with rank_bm25 (Okapi): 0.879 at difficulty 0, 0.525 at 0.5 (default), 0.221 at 1
    assert ndcg10(GenerateParams(difficulty=0.0)) > 0.8
    assert 0.4 < ndcg10(GenerateParams()) < 0.7
    assert ndcg10(GenerateParams(difficulty=1.0)) < 0.35


def test_the_catalogue_is_package_data_the_wheel_ships():
    import fnmatch
    import tomllib
    from pathlib import Path

    root = Path(gen.__file__).parent
    setuptools = tomllib.loads((root.parents[1] / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = setuptools["package-data"]["retrieval_lab"]
    # the compiled extensions: their C sources and what the install builds of them are code, not package data
    compiled = {src.removeprefix("src/retrieval_lab/") for ext in setuptools["ext-modules"] for src in ext["sources"]}
    built = [ext["name"].removeprefix("retrieval_lab.").replace(".", "/") for ext in setuptools["ext-modules"]]
    data = [p.relative_to(root).as_posix() for p in root.rglob("*")  # __pycache__: Python's caches
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
            and p.relative_to(root).as_posix() not in compiled
            and not any(p.relative_to(root).as_posix().startswith(name + ".") and p.suffix in (".so", ".pyd")
                        for name in built)]
    assert compiled == {"retrievers/_bm25_kernel.c"} and built == ["retrievers/_bm25_kernel"]
    assert gen.CATALOGUE in data
    assert [f for f in data if not any(fnmatch.fnmatch(f, pattern) for pattern in patterns)] == []
    # 20 components with two families each, three confusables per family (the checks' upper bounds)
    assert (len(gen.COMPONENTS), len(gen.FAMILIES), len(gen.GENERIC), len(gen.GENERIC_TEMPLATES)) == (20, 40, 32, 4)


GOOD_FAMILY = """
      - id: f1
        symptoms: [s1, s2]
        paraphrases: [p1]
        primary: {title: t1, steps: [a, b]}
        alternative: {title: t2, steps: [c]}
        confusables:
          - {title: c1, text: x, cue: y}
"""


@pytest.mark.parametrize("family, field, reason", [
    (GOOD_FAMILY.replace(", cue: y", ""), "components.dns.families[0].confusables[0]",
     "expected the keys ['title', 'text', 'cue'], got ['text', 'title']"),
    (GOOD_FAMILY.replace("[s1, s2]", "[]"), "components.dns.families[0].symptoms", "expected a non-empty list"),
    (GOOD_FAMILY.replace("steps: [c]", "steps: [c, 3]"), "components.dns.families[0].alternative.steps[1]",
     "expected a non-empty string, got 3"),
    (GOOD_FAMILY.replace("text: x", "text: ''"), "components.dns.families[0].confusables[0].text",
     "expected a non-empty string, got ''"),
    (GOOD_FAMILY + GOOD_FAMILY.lstrip("\n"), "components.dns.families[1].id", "family id 'f1' used twice"),
])
def test_a_broken_catalogue_names_the_field(family, field, reason):
    text = ("components:\n  dns:\n    name: DNS\n    families:" + family
            + "generic: [{title: g, text: h}]\ngeneric_templates: [{title: '{name}', text: i}]\n")
    names, families, generic, _ = gen.parse_catalogue(text.replace(family, GOOD_FAMILY))
    assert names == {"dns": "DNS"} and families[0].alternative == gen.Procedure("t2", ("c",))
    assert families[0].component == "dns" and generic == (gen.Page("g", "h"),)
    with pytest.raises(InputError) as info:
        gen.parse_catalogue(text)
    assert (info.value.field, info.value.reason) == (field, reason)
    assert str(info.value).startswith(f"{gen.CATALOGUE} field '{field}'")
