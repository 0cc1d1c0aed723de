"""Stage prepare: family split, given splits, and the leakage audit proven by planted faults."""

from __future__ import annotations

import json

import pytest
from beir_fixtures import write_beir, write_family_beir

from retrieval_lab import cli
from retrieval_lab.core.data import load_dataset, read_qrels
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import PrepareParams
from retrieval_lab.prepare import (
    LeakageError,
    assign_families,
    carve_validation,
    positive_components,
    prepare,
)


def test_family_split_keeps_families_whole_and_follows_ratios(tmp_path):
    raw = write_family_beir(tmp_path / "raw")
    audit = prepare(raw, tmp_path / "out", tmp_path / "held", PrepareParams(seed=3, train=0.6, val=0.2, test=0.2))
    # 10 families: val = round(10 * 0.2) = 2, test = 2, train = 10 - 4 = 6; two queries per family
    assert {s: v["families"] for s, v in audit["splits"].items()} == {"train": 6, "val": 2, "test": 2}
    assert {s: v["queries"] for s, v in audit["splits"].items()} == {"train": 12, "val": 4, "test": 4}
    prepared = load_dataset(tmp_path / "out")
    assert sorted(prepared.qrels) == ["train", "val"]  # the test labels are not in the prepared folder
    splits = {**prepared.qrels, "test": read_qrels(tmp_path / "held" / "qrels" / "test.tsv")}
    assert len(splits["test"]) == 4
    seen = {}
    for split, qrels in splits.items():
        for qid in qrels:
            family = prepared.queries[qid].family
            assert seen.setdefault(family, split) == split  # no family in two splits
    assert audit["leakage"]["families_in_several_splits"] == {}


def test_split_is_seeded_and_deterministic(tmp_path):
    families = [f"fam{i}" for i in range(20)]
    a = assign_families(families, PrepareParams(seed=1))
    assert a == assign_families(list(reversed(families)), PrepareParams(seed=1))  # input order irrelevant
    assert a != assign_families(families, PrepareParams(seed=2))
    raw = write_family_beir(tmp_path / "raw")
    prepare(raw, tmp_path / "o1", tmp_path / "h1", PrepareParams())
    prepare(raw, tmp_path / "o2", tmp_path / "h2", PrepareParams())
    for name in ["qrels/train.tsv", "qrels/val.tsv", "corpus.jsonl", "split.json"]:
        assert (tmp_path / "o1" / name).read_bytes() == (tmp_path / "o2" / name).read_bytes()
    for name in ["qrels/test.tsv", "split_audit.json"]:
        assert (tmp_path / "h1" / name).read_bytes() == (tmp_path / "h2" / name).read_bytes()


def test_planted_cross_family_positive_fails_and_writes_nothing(tmp_path):
    # A query of one family judged relevant to a document of another: after the split one of
    # the two families is (for this seed) in train and the other held out, a leak.
    params = PrepareParams(seed=3, train=0.6, val=0.2, test=0.2)
    fams = assign_families([f"fam{i}" for i in range(10)], params)
    held = next(f for f, s in sorted(fams.items()) if s == "test")
    train = next(f for f, s in sorted(fams.items()) if s == "train")
    plant = (f"f{held[3:]}-q0", f"f{train[3:]}-p0", 1)
    raw = write_family_beir(tmp_path / "raw", plant=plant)
    with pytest.raises(LeakageError) as info:
        prepare(raw, tmp_path / "out", tmp_path / "held", params)
    assert f"f{train[3:]}-p0" in str(info.value) and "queries.jsonl" in str(info.value)
    assert not (tmp_path / "out").exists() and not (tmp_path / "held").exists()


def test_family_planted_in_two_given_splits_fails(tmp_path):
    corpus = [{"_id": "d1", "title": "", "text": "a", "metadata": {"family": "x"}},
              {"_id": "d2", "title": "", "text": "b", "metadata": {"family": "y"}}]
    queries = [{"_id": "q1", "text": "a?", "metadata": {"family": "x"}},
               {"_id": "q2", "text": "a!", "metadata": {"family": "x"}}]
    raw = write_beir(tmp_path / "raw", corpus, queries,
                     {"train": [("q1", "d1", 1)], "test": [("q2", "d1", 1)]})
    with pytest.raises(LeakageError) as info:
        prepare(raw, tmp_path / "out", tmp_path / "held", PrepareParams())
    assert "family 'x'" in str(info.value) and "['test', 'train']" in str(info.value)
    assert not (tmp_path / "out").exists()


def test_scifact_validation_is_carved_from_train_as_unseen_groups(tmp_path, scifact_dir):
    audit = prepare(scifact_dir, tmp_path / "out", tmp_path / "held", PrepareParams())
    assert audit["mode"] == "given" and audit["validation"].startswith("carved from train: 0.15")
    counts = {s: v["queries"] for s, v in audit["splits"].items()}
    # 809 train claims: round(0.15 * 809) = 121 moved at least, whole groups, so a few more
    assert counts["test"] == 300 and counts["train"] + counts["val"] == 809 and 121 <= counts["val"] <= 135
    prepared = load_dataset(tmp_path / "out")
    train, val = prepared.qrels["train"], prepared.qrels["val"]
    trained = {d for j in train.values() for d, r in j.items() if r > 0}
    assert all(not ({d for d, r in j.items() if r > 0} & trained) for j in val.values())  # val is unseen
    test = read_qrels(tmp_path / "held" / "qrels" / "test.tsv")
    seen = sum(bool({d for d, r in j.items() if r > 0} & trained) for j in test.values())
    assert audit["splits"]["test"]["seen_queries"] == seen and 0 < seen < 300
    assert audit["splits"]["val"]["seen_queries"] == 0
    # SciFact's official train and test share two claim texts under different ids: reported, not refused
    shared = audit["leakage"]["same_text_in_several_splits"]
    assert len(shared) == 2 and all(set(item["ids"]) == {"train", "test"} or "val" in item["ids"] for item in shared)
    saved = json.loads((tmp_path / "held" / "split_audit.json").read_text())
    assert saved["leakage"]["heldout_positive_documents"] == audit["leakage"]["heldout_positive_documents"] > 0
    assert not (tmp_path / "out" / "qrels" / "test.tsv").exists()
    assert json.loads((tmp_path / "out" / "split.json").read_text())["queries"] == {"train": counts["train"],
                                                                                    "val": counts["val"]}


DOCS = [{"_id": f"d{i}", "title": "", "text": f"text {i}"} for i in range(1, 9)]
QUERIES = [{"_id": f"q{i}", "text": f"question {i}"} for i in range(1, 9)]


def test_positive_components_by_hand():
    qrels = {"q1": {"d1": 1}, "q2": {"d1": 1, "d2": 1}, "q3": {"d3": 2, "d2": 0},
             "q4": {"d4": 1}, "q5": {"d5": 1, "d4": 1}, "q6": {"d6": 1}}
    # q1-q2 share d1; q4-q5 share d4; q3's d2 is judged 0, not a positive, so q3 stands alone
    assert positive_components(qrels) == [["q1", "q2"], ["q3"], ["q4", "q5"], ["q6"]]


def test_carved_validation_shares_no_positive_with_train_and_is_seeded():
    qrels = {"q1": {"d1": 1}, "q2": {"d1": 1, "d2": 1}, "q3": {"d3": 1},
             "q4": {"d4": 1}, "q5": {"d5": 1, "d4": 1}, "q6": {"d6": 1}}
    for seed in range(20):
        train, val = carve_validation(qrels, PrepareParams(seed=seed, val_from_train=0.34))
        # target round(6 * 0.34) = 2: whole groups until at least 2 queries moved
        assert sorted(train) + sorted(val) != [] and set(train) | set(val) == set(qrels)
        assert 2 <= len(val) <= 3 and not set(train) & set(val)
        assert {"q1", "q2"} <= set(val) or not {"q1", "q2"} & set(val)  # never split a group
        trained = {d for j in train.values() for d in j}
        assert not any(set(j) & trained for j in val.values())
        assert (train, val) == carve_validation(qrels, PrepareParams(seed=seed, val_from_train=0.34))
    singles = [carve_validation(qrels, PrepareParams(seed=s, val_from_train=0.34, val_unseen=False))[1]
               for s in range(20)]
    assert all(len(v) == 2 for v in singles)  # single queries: exactly the target
    assert any({"q1", "q2"} & set(v) and not {"q1", "q2"} <= set(v) for v in singles)  # groups may split


@pytest.mark.parametrize("name", ["dev", "val"])
def test_given_validation_split_is_used(tmp_path, name):
    raw = write_beir(tmp_path / "raw", DOCS, QUERIES, {"train": [("q1", "d1", 1), ("q2", "d2", 1)],
                                                       name: [("q3", "d1", 1)], "test": [("q4", "d4", 1)]})
    audit = prepare(raw, tmp_path / "out", tmp_path / "held", PrepareParams())
    assert audit["validation"] == f"given (qrels/{name}.tsv)"
    assert load_dataset(tmp_path / "out").qrels["val"] == {"q3": {"d1": 1}}
    assert audit["splits"]["val"]["seen_queries"] == 1  # d1 is q1's training positive
    assert audit["splits"]["test"]["seen_queries"] == 0


def test_both_dev_and_val_are_ambiguous(tmp_path):
    raw = write_beir(tmp_path / "raw", DOCS, QUERIES, {"train": [("q1", "d1", 1)], "dev": [("q3", "d1", 1)],
                                                       "val": [("q5", "d1", 1)], "test": [("q4", "d4", 1)]})
    with pytest.raises(InputError, match="both qrels/dev.tsv and qrels/val.tsv"):
        prepare(raw, tmp_path / "out", tmp_path / "held", PrepareParams())
    assert not (tmp_path / "out").exists()


def test_query_id_in_two_given_splits_is_refused_naming_it(tmp_path):
    raw = write_beir(tmp_path / "raw", DOCS, QUERIES, {"train": [("q1", "d1", 1), ("q2", "d2", 1)],
                                                       "test": [("q2", "d3", 1), ("q4", "d4", 1)]})
    with pytest.raises(LeakageError) as info:
        prepare(raw, tmp_path / "out", tmp_path / "held", PrepareParams())
    assert "1 query ids are judged in several splits: 'q2' (train + test)" in str(info.value)
    assert str(raw / "qrels") in str(info.value)
    assert not (tmp_path / "out").exists() and not (tmp_path / "held").exists()


def test_same_text_under_two_ids_is_reported_not_refused(tmp_path, capsys):
    queries = QUERIES + [{"_id": "t9", "text": "Question  1"}]  # q1's text, other case and spacing
    raw = write_beir(tmp_path / "raw", DOCS, queries, {"train": [("q1", "d1", 1), ("q2", "d2", 1)],
                                                       "test": [("t9", "d3", 1)]})
    assert cli.main(["prepare", "--raw", str(raw), "--output", str(tmp_path / "out"), "--heldout",
                     str(tmp_path / "held"), "--set", "prepare.val_from_train=0"]) == 0
    out = capsys.readouterr().out
    assert "the same query text under ids {'train': ['q1'], 'test': ['t9']}" in out
    audit = json.loads((tmp_path / "held" / "split_audit.json").read_text())
    assert audit["leakage"]["same_text_in_several_splits"] == [
        {"text": "question 1", "ids": {"train": ["q1"], "test": ["t9"]}}]
    assert audit["validation"] == "none (prepare.val_from_train is 0)"
