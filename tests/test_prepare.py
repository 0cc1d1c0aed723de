"""Stage prepare: family split, given splits, and the leakage audit proven by planted faults."""

from __future__ import annotations

import json

import pytest
from beir_fixtures import write_beir

from retrieval_lab.core.config import PrepareParams
from retrieval_lab.core.data import load_dataset
from retrieval_lab.prepare import LeakageError, assign_families, prepare


def _family_dataset(root, families=10, plant=None):
    """Each family f: two procedures (positives) and two queries; ``plant`` adds a judgment."""
    corpus, queries, rows = [], [], []
    for f in range(families):
        for p in range(2):
            corpus.append({"_id": f"f{f}-p{p}", "title": f"proc {p}", "text": f"fix family {f} way {p}",
                           "metadata": {"family": f"fam{f}"}})
        for q in range(2):
            queries.append({"_id": f"f{f}-q{q}", "text": f"problem {f} variant {q}",
                            "metadata": {"family": f"fam{f}"}})
            rows += [(f"f{f}-q{q}", f"f{f}-p0", 2), (f"f{f}-q{q}", f"f{f}-p1", 1)]
    if plant:
        rows.append(plant)
    return write_beir(root, corpus, queries, {"all": rows})


def test_family_split_keeps_families_whole_and_follows_ratios(tmp_path):
    raw = _family_dataset(tmp_path / "raw")
    audit = prepare(raw, tmp_path / "out", PrepareParams(seed=3, train=0.6, val=0.2, test=0.2))
    # 10 families: val = round(10 * 0.2) = 2, test = 2, train = 10 - 4 = 6; two queries per family
    assert {s: v["families"] for s, v in audit["splits"].items()} == {"train": 6, "val": 2, "test": 2}
    assert {s: v["queries"] for s, v in audit["splits"].items()} == {"train": 12, "val": 4, "test": 4}
    prepared = load_dataset(tmp_path / "out")
    seen = {}
    for split, qrels in prepared.qrels.items():
        for qid in qrels:
            family = prepared.queries[qid].family
            assert seen.setdefault(family, split) == split  # no family in two splits
    assert audit["leakage"]["families_in_several_splits"] == {}


def test_split_is_seeded_and_deterministic(tmp_path):
    families = [f"fam{i}" for i in range(20)]
    a = assign_families(families, PrepareParams(seed=1))
    assert a == assign_families(list(reversed(families)), PrepareParams(seed=1))  # input order irrelevant
    assert a != assign_families(families, PrepareParams(seed=2))
    raw = _family_dataset(tmp_path / "raw")
    prepare(raw, tmp_path / "o1", PrepareParams())
    prepare(raw, tmp_path / "o2", PrepareParams())
    for name in ["qrels/train.tsv", "qrels/test.tsv", "corpus.jsonl", "split_audit.json"]:
        assert (tmp_path / "o1" / name).read_bytes() == (tmp_path / "o2" / name).read_bytes()


def test_planted_cross_family_positive_fails_and_writes_nothing(tmp_path):
    # A query of one family judged relevant to a document of another: after the split one of
    # the two families is (for this seed) in train and the other held out, a leak.
    params = PrepareParams(seed=3, train=0.6, val=0.2, test=0.2)
    fams = assign_families([f"fam{i}" for i in range(10)], params)
    held = next(f for f, s in sorted(fams.items()) if s == "test")
    train = next(f for f, s in sorted(fams.items()) if s == "train")
    plant = (f"f{held[3:]}-q0", f"f{train[3:]}-p0", 1)
    raw = _family_dataset(tmp_path / "raw", plant=plant)
    with pytest.raises(LeakageError) as info:
        prepare(raw, tmp_path / "out", params)
    assert f"f{train[3:]}-p0" in str(info.value) and "queries.jsonl" in str(info.value)
    assert not (tmp_path / "out").exists()


def test_family_planted_in_two_given_splits_fails(tmp_path):
    corpus = [{"_id": "d1", "title": "", "text": "a", "metadata": {"family": "x"}},
              {"_id": "d2", "title": "", "text": "b", "metadata": {"family": "y"}}]
    queries = [{"_id": "q1", "text": "a?", "metadata": {"family": "x"}},
               {"_id": "q2", "text": "a!", "metadata": {"family": "x"}}]
    raw = write_beir(tmp_path / "raw", corpus, queries,
                     {"train": [("q1", "d1", 1)], "test": [("q2", "d1", 1)]})
    with pytest.raises(LeakageError) as info:
        prepare(raw, tmp_path / "out", PrepareParams())
    assert "family 'x'" in str(info.value) and "['test', 'train']" in str(info.value)
    assert not (tmp_path / "out").exists()


def test_given_splits_are_kept(tmp_path, scifact_dir):
    audit = prepare(scifact_dir, tmp_path / "out", PrepareParams())
    assert audit["mode"] == "given"
    assert {s: v["queries"] for s, v in audit["splits"].items()} == {"train": 809, "val": 0, "test": 300}
    saved = json.loads((tmp_path / "out" / "split_audit.json").read_text())
    assert saved["leakage"]["heldout_positive_documents"] == audit["leakage"]["heldout_positive_documents"] > 0
