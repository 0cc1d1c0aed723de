"""Mining and its audit on a tiny family-split dataset with planted traps."""

from __future__ import annotations

import argparse
import hashlib
import json
from collections import Counter
from dataclasses import replace

import pytest
from beir_fixtures import default_params, write_beir

from retrieval_lab import mining, negatives
from retrieval_lab.commands import mine as mine_command
from retrieval_lab.core.atomic import MARKER
from retrieval_lab.core.data import load_dataset
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import MineParams, PrepareParams
from retrieval_lab.mining import (
    Check,
    MiningAuditError,
    audit_negatives,
    margin_drops,
    mine,
    mine_to_dir,
    mining_pool,
)
from retrieval_lab.negatives import AUDIT_FILE, NEGATIVES_FILE, Candidate, MinedQuery, read_negatives
from retrieval_lab.prepare import prepare
from retrieval_lab.runs import write_run

# Families: fa = train, fb = test, fc = val. g* have no family. A prepared folder holds no test qrels
# (prepare writes them to the held-out folder): qb is in queries.jsonl, but nothing says what is relevant to it.
DOCS = [("a1", "fa"), ("a2", "fa"), ("a3", "fa"), ("b1", "fb"), ("b2", "fb"), ("c1", "fc")] + \
       [(f"g{i}", None) for i in range(1, 7)]
QUERIES = [("qa", "fa"), ("qa2", "fa"), ("qb", "fb"), ("qc", "fc")]
QRELS = {
    "train": [("qa", "a1", 1), ("qa", "a2", 1), ("qa", "g1", 0), ("qa2", "a3", 1)],
    "val": [("qc", "c1", 1)],
    "extra": [("qa", "g2", 2)],  # a positive of qa annotated outside train: still never a negative
}
# qa's run: b1 and b2 (test family: qb is not a training query) and c1 (val positive) are not in the pool.
QA_RUN = {"b1": 0.99, "b2": 0.98, "g1": 0.95, "a1": 0.9, "g2": 0.85, "a2": 0.8, "g3": 0.7, "c1": 0.65,
          "g4": 0.6, "a3": 0.5, "g5": 0.4}
# pool ranks:  g1 1, a1 2, g2 3, a2 4, g3 5, g4 6, a3 7, g5 8   (g6 unretrieved)


def _dataset(tmp_path, mode="family"):
    corpus = [{"_id": d, "title": "", "text": f"text {d}", **({"metadata": {"family": f}} if f else {})}
              for d, f in DOCS]
    queries = [{"_id": q, "text": f"query {q}", "metadata": {"family": f}} for q, f in QUERIES]
    root = write_beir(tmp_path / "prepared", corpus, queries, QRELS)
    (root / "split.json").write_text(json.dumps({"mode": mode}), encoding="utf-8")
    return load_dataset(root)


def _run():
    return {"qa": dict(QA_RUN), "qa2": {"a3": 0.9, "g1": 0.8, "b1": 0.7, "g2": 0.6}}


def _negatives(records, qid="qa"):
    return [n.id for n in next(r for r in records if r.query_id == qid).negatives]


def test_pool_excludes_heldout_families_and_heldout_positives(tmp_path):
    pool = mining_pool(_dataset(tmp_path))
    assert pool.documents == {"a1", "a2", "a3", "g1", "g2", "g3", "g4", "g5", "g6"}
    assert pool.excluded == {"b1": "in held-out family 'fb'", "b2": "in held-out family 'fb'",
                             "c1": "relevant to val query 'qc'"}
    # A given split (SciFact) has no family rule: val positives stay out; test labels are out of reach.
    pool = mining_pool(_dataset(tmp_path / "given", mode="given"))
    assert pool.documents == {"a1", "a2", "a3", "b1", "b2", "g1", "g2", "g3", "g4", "g5", "g6"}


def test_hard_ranks_skip_positives_and_heldout_documents(tmp_path):
    dataset = _dataset(tmp_path)
    # ranks 4..6 = a2 (positive, removed), g3, g4; the held-out b1/b2/c1 scored higher but are not in the pool
    records = mine(_run(), dataset, MineParams(seed=1, count=2, range_min=4, range_max=6), "hard")
    (qa,) = [r for r in records if r.query_id == "qa"]
    assert qa.positives == ("a1", "a2") and qa.lowest_positive_score == 0.8
    assert qa.negatives == (Candidate("g3", 5, 0.7), Candidate("g4", 6, 0.6))


def test_planted_positive_high_in_pool_is_never_selected(tmp_path):
    dataset = _dataset(tmp_path)
    # ranks 1..8, 10 wanted: every pool document in range but the positives a1, a2 and g2 (qa's positive
    # in the 'extra' split, rank 3): 5 negatives -> shortfall 5
    params = MineParams(seed=3, count=10, range_min=1, range_max=8)
    records = mine(_run(), dataset, params, "hard")
    assert _negatives(records) == ["g1", "g3", "g4", "a3", "g5"]
    audit = audit_negatives(records, dataset, params.count, "hard")
    assert audit.passed and audit.checks()["false_negative_fraction"] == 0.0
    assert audit.shortfall == {"qa": 5, "qa2": 8}  # qa2: pool ranks a3 (positive), g1, g2
    # g1 (0.95) scores above qa's weakest positive a2 (0.8): flagged for review, not failed
    assert [(s["query_id"], s["doc_id"]) for s in audit.suspicious] == [("qa", "g1")]
    for seed in range(30):  # random draws: never a positive, never outside the pool, every candidate reachable
        seen = set()
        for s in range(seed * 10, seed * 10 + 10):
            seen |= set(_negatives(mine(_run(), dataset, MineParams(seed=s, count=2), "random")))
        assert seen <= {"a3", "g1", "g3", "g4", "g5", "g6"}
    assert seen == {"a3", "g1", "g3", "g4", "g5", "g6"}


def test_margin_keeps_only_negatives_clearly_below_the_weakest_positive(tmp_path):
    dataset = _dataset(tmp_path)
    base = MineParams(seed=0, count=5, range_min=4, range_max=8)
    # lowest positive 0.8; margin 0.1 -> below 0.72: g3 0.7, g4 0.6, a3 0.5, g5 0.4
    assert _negatives(mine(_run(), dataset, replace(base, margin=0.1), "hard")) == ["g3", "g4", "a3", "g5"]
    # margin 0.2 -> below 0.64: g3 (0.7) goes
    assert _negatives(mine(_run(), dataset, replace(base, margin=0.2), "hard")) == ["g4", "a3", "g5"]
    # the audit names what the margin kept out: g3 for qa (0.7 >= 0.64 = 0.8 x 0.8); qa2's only positive
    # a3 scores 0.9, ceiling 0.72, and its window (ranks 4..8 of a3 g1 g2 ...) holds nothing
    dropped = margin_drops(_run(), dataset, replace(base, margin=0.2))
    assert dropped["dropped"] == 1 and dropped["queries"] == 1
    assert dropped["by_query"]["qa"]["ceiling"] == pytest.approx(0.64)
    assert dropped["by_query"]["qa"]["dropped"] == [{"id": "g3", "rank": 5, "score": 0.7}]
    assert margin_drops(_run(), dataset, base) == {"margin": None, "dropped": 0, "queries": 0, "by_query": {}}


def test_random_is_seeded(tmp_path):
    dataset = _dataset(tmp_path)
    one = mine(_run(), dataset, MineParams(seed=5, count=3), "random")
    assert one == mine(_run(), dataset, MineParams(seed=5, count=3), "random")
    assert len(_negatives(one)) == 3
    g6 = [n for r in mine(_run(), dataset, MineParams(seed=5, count=6), "random") if r.query_id == "qa"
          for n in r.negatives if n.id == "g6"]
    assert g6 == [Candidate("g6", None, None)]  # drawn from the pool though never retrieved


@pytest.mark.parametrize("planted, check, problem", [
    ("a1", Check.ANNOTATED_POSITIVE, "annotated positive of this query"),
    ("g2", Check.ANNOTATED_POSITIVE, "annotated positive of this query"),
    ("b1", Check.OUTSIDE_POOL, "outside the mining pool (in held-out family 'fb')"),
    ("b2", Check.OUTSIDE_POOL, "outside the mining pool (in held-out family 'fb')"),
    ("zz", Check.UNKNOWN_DOCUMENT, "unknown document"),
])
def test_audit_fails_on_planted_negative(tmp_path, planted, check, problem):
    dataset = _dataset(tmp_path)
    records = mine(_run(), dataset, MineParams(seed=0, count=1, range_min=5, range_max=5), "hard")
    records = [replace(r, negatives=r.negatives + (Candidate(planted, 1, 1.0),)) if r.query_id == "qa" else r
               for r in records]
    audit = audit_negatives(records, dataset, 1)
    assert not audit.passed
    assert [(f.check, f.query_id, f.doc_id, f.problem) for f in audit.failures] == [(check, "qa", planted, problem)]
    fraction = 1 / 2 if check is Check.ANNOTATED_POSITIVE else 0.0  # g3 + planted (qa2 has no pool rank 5)
    checks = audit.checks()
    assert checks["false_negative_fraction"] == pytest.approx(fraction)
    # the pool check reads the failure's check id: a failure of another kind never clears or trips it
    assert checks["all_negatives_in_pool"] == (check is not Check.OUTSIDE_POOL)
    assert checks["no_annotated_positive"] == (check is not Check.ANNOTATED_POSITIVE)


def _args(**kw):
    parser = argparse.ArgumentParser()
    mine_command.configure(parser)
    argv = []
    for key, value in kw.items():
        argv += [f"--{key}", str(value)]
    return parser.parse_args(argv)


def test_command_writes_audited_outputs_and_audits_a_file(tmp_path, capsys):
    dataset = _dataset(tmp_path)
    write_run(tmp_path / "dense.trec", _run(), "dense")
    out = tmp_path / "mined" / "hard"
    args = _args(dataset=dataset.path, run=tmp_path / "dense.trec", strategy="hard", output=out,
                 params=default_params(tmp_path))
    assert mine_command.run(args) == 0
    records = read_negatives(out / "negatives.jsonl")
    assert [(r.query_id, r.line) for r in records] == [("qa", 1), ("qa2", 2)]
    audit = json.loads((out / "mining-audit.json").read_text())
    assert audit["passed"] and audit["strategy"] == "hard" and audit["count"] == 1
    assert audit["per_query"]["qa"] == [records[0].negatives[0].to_json()]
    # the audit file names the run mined as its source, and the params separately
    assert audit["source"] == str(tmp_path / "dense.trec") and audit["params"]["source"] == "dense"
    assert mine_command.run(_args(audit=out / "negatives.jsonl", dataset=dataset.path,
                                  params=default_params(tmp_path))) == 0
    # plant the test-split positive b1 into the file: the standalone audit must fail, naming the line
    lines = (out / "negatives.jsonl").read_text().splitlines()
    bad = json.loads(lines[1])
    bad["negatives"].append({"id": "b1", "rank": 2, "score": 0.7})
    (tmp_path / "bad.jsonl").write_text(lines[0] + "\n" + json.dumps(bad) + "\n")
    capsys.readouterr()
    assert mine_command.run(_args(audit=tmp_path / "bad.jsonl", dataset=dataset.path,
                                  params=default_params(tmp_path))) == 1
    assert "line 2: query 'qa2' document 'b1': outside the mining pool" in capsys.readouterr().err


def test_an_audit_of_an_empty_file_fails_closed(tmp_path, capsys):
    # no record: nothing was checked, so nothing may pass (the dataset has two training queries)
    dataset = _dataset(tmp_path)
    (tmp_path / "empty.jsonl").write_text("")
    assert mine_command.run(_args(audit=tmp_path / "empty.jsonl", dataset=dataset.path,
                                  params=default_params(tmp_path))) == 1
    captured = capsys.readouterr()
    assert '"passed": false' in captured.out and '"queries": 0' in captured.out
    assert "no query's negatives to audit" in captured.err


def test_stage_fails_and_writes_nothing_when_a_strategy_leaks(tmp_path, monkeypatch):
    dataset = _dataset(tmp_path)
    leaky = lambda ranking, pool_docs, positive, lowest, params, rng: [ranking[0]]
    monkeypatch.setitem(mining.STRATEGIES, "hard", leaky)  # qa's pool rank 1 is g1; qa2's is a3, its positive
    with pytest.raises(MiningAuditError, match="query 'qa2' document 'a3': annotated positive"):
        mine_to_dir(_run(), dataset, MineParams(), "hard", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_read_negatives_names_line_and_field(tmp_path):
    path = tmp_path / "n.jsonl"
    path.write_text('{"query_id": "q", "positives": ["d"], "negatives": []}\n'
                    '{"query_id": "r", "positives": ["d"], "negatives": [{"id": "x", "rank": "1"}]}\n')
    with pytest.raises(InputError, match=r"n.jsonl:2 field 'negatives\[0\].rank'"):
        read_negatives(path)
    with pytest.raises(InputError, match="unknown strategy 'hardest' \\(choices: hard, random\\)"):
        mine({}, _dataset(tmp_path), MineParams(), "hardest")


@pytest.mark.scifact
def test_scifact_val_positives_planted_at_the_top_are_never_mined(scifact_dir, tmp_path):
    # SciFact shares one corpus between splits: a val query's relevant document must not become a
    # training negative even when the run ranks it first for every training query.
    prepare(scifact_dir, tmp_path / "prepared", tmp_path / "heldout", PrepareParams())
    dataset = load_dataset(tmp_path / "prepared")
    assert sorted(dataset.qrels) == ["train", "val"]
    val_docs = sorted({d for judged in dataset.qrels["val"].values() for d, r in judged.items() if r > 0})
    others = sorted(set(dataset.corpus) - set(val_docs))
    run = {}
    for k, qid in enumerate(sorted(dataset.qrels["train"])):
        planted = {d: 100.0 - i for i, d in enumerate(val_docs[k % 50:k % 50 + 20])}  # ranks 1..20
        run[qid] = {**planted, **{d: 10.0 - i / 100 for i, d in enumerate(others[k:k + 30])}}
    params = MineParams(seed=0, count=2, range_min=1, range_max=13)
    records = mine(run, dataset, params, "hard")
    mined = {n.id for r in records for n in r.negatives}
    assert mined and not mined & set(val_docs)
    audit = audit_negatives(records, dataset, params.count)
    empty = sum(not doc.content() for d, doc in dataset.corpus.items() if d not in val_docs)
    assert audit.passed and len(audit.pool.excluded) == len(val_docs) + empty
    assert audit.queries == sum(1 for j in dataset.qrels["train"].values() if any(r > 0 for r in j.values()))
    # the pool ranks start after the planted documents: rank 1 is the first non-test document
    assert min(n.rank for r in records for n in r.negatives) == 1


def test_read_strategy_finds_the_audit_write_mined_wrote(tmp_path, monkeypatch):
    out = tmp_path / "mined"
    negatives.write_mined(out, [], {"strategy": "random"})
    assert negatives.read_strategy(out / NEGATIVES_FILE) == "random"
    assert AUDIT_FILE == "mining-audit.json"
    # one name for the audit file: renaming it moves the reader with the writer
    monkeypatch.setattr(negatives, "AUDIT_FILE", "audit.json")
    negatives.write_mined(tmp_path / "renamed", [], {"strategy": "hard"})
    assert sorted(p.name for p in (tmp_path / "renamed").iterdir()) == [MARKER, "audit.json", "negatives.jsonl"]
    assert negatives.read_strategy(tmp_path / "renamed" / NEGATIVES_FILE) == "hard"
    assert negatives.read_strategy(tmp_path / "elsewhere" / "negatives.jsonl") is None  # no audit: unknown
    (tmp_path / "renamed" / "audit.json").write_text('{"strategy":\n  hard}')
    with pytest.raises(InputError, match=r"audit\.json:2: malformed JSON"):
        negatives.read_strategy(tmp_path / "renamed" / NEGATIVES_FILE)


def test_the_pool_without_positives_draws_as_the_built_list_would():
    import random

    from retrieval_lab.mining import _LazyDifference

    ordered = sorted(f"d{i:03d}" for i in range(300))
    for seed in range(40):
        rng = random.Random(seed)
        removed = set(rng.sample(ordered, rng.randint(0, 6))) | {"not-in-pool"}
        listed = [d for d in ordered if d not in removed]
        lazy = _LazyDifference(ordered, removed)
        assert len(lazy) == len(listed) and list(lazy) == listed and lazy[-1] == listed[-1]
        count = rng.choice([1, 3, 7, 40])
        # the same seed gives the same negatives: mined files do not change with this optimisation
        assert random.Random(f"11:q{seed}").sample(lazy, count) == random.Random(f"11:q{seed}").sample(listed, count)


def test_triplets_draw_one_negative_per_positive_seeded():
    records = [MinedQuery("qa", ("d2", "d0"), None, (Candidate("d4", 4, 0.5), Candidate("d6", 5, 0.4))),
               MinedQuery("qb", ("d5",), None, ()),  # no negative: no row
               MinedQuery("qc", ("d7",), None, (Candidate("d9", 4, 0.5),))]
    rows = mining.triplets(records, seed=3)
    # qa's positives in sorted order, each with a negative of its own record; qc's only negative is d9
    assert [(q, p) for q, p, _ in rows] == [("qa", "d0"), ("qa", "d2"), ("qc", "d7")]
    assert {rows[0][2], rows[1][2]} <= {"d4", "d6"} and rows[2][2] == "d9"
    assert mining.triplets(records, seed=3) == rows  # seeded


def test_triplets_of_the_hard_window_draw_every_window_document(tmp_path):
    # qa's pool ranks (see QA_RUN): g1 1, a1 2, g2 3, a2 4, g3 5, g4 6, a3 7, g5 8; qa's
    # positives a1 and a2 (and g2, relevant in another split) count toward ranks but are never
    # drawn, so ranks 4-8 leave g3, g4, a3, g5 -- a3 is qa2's positive, a fine negative for qa
    dataset = _dataset(tmp_path)
    window = MineParams(count=5, range_min=4, range_max=8)
    records = mine(_run(), dataset, window, "hard")
    assert _negatives(records) == ["g3", "g4", "a3", "g5"]
    drawn = Counter(row[2] for s in range(60) for row in mining.triplets(records, seed=s) if row[0] == "qa")
    # 120 draws over 4 documents: P(a given one missing) = (3/4)^120 ~ 1e-15
    assert set(drawn) == {"g3", "g4", "a3", "g5"}


def test_mined_files_keep_the_bytes_they_had_before_the_typed_records(tmp_path, monkeypatch, capsys):
    # sha256 of what `mine` wrote for these inputs before its records, candidates and audit became
    # dataclasses (commit 1978527); the window 1..8 with margin 0.1 drops g1 (0.95 >= 0.72) for qa
    dataset = _dataset(tmp_path)
    monkeypatch.chdir(tmp_path)  # the audit records the run path as given
    write_run(tmp_path / "dense.trec", _run(), "dense")
    (tmp_path / "p.yaml").write_text("mine:\n  count: 3\n  range_min: 1\n  range_max: 8\n  margin: 0.1\n")
    digests = {}
    for strategy in ("hard", "random"):
        assert mine_command.run(_args(dataset=dataset.path, run="dense.trec", strategy=strategy,
                                      output=f"out/{strategy}", params="p.yaml")) == 0
        for name in (NEGATIVES_FILE, AUDIT_FILE):
            digests[f"{strategy}/{name}"] = hashlib.sha256((tmp_path / "out" / strategy / name).read_bytes()).hexdigest()
    assert json.loads((tmp_path / "out" / "hard" / AUDIT_FILE).read_text())["margin_dropped"]["dropped"] >= 1
    assert digests == {
        "hard/negatives.jsonl": "dad77b7a5936abd9fbd906edddb3a88f589b842de340c0efa53fe5239f90886e",
        "hard/mining-audit.json": "ae8ed87cc2250b503a9b258b57925e6668421a31d32d4749f0216d4384f9ee49",
        "random/negatives.jsonl": "8399c1bb0d25873ba7bc5687961e4e53b00fe252b721c4ac00f9d79910ac28ed",
        "random/mining-audit.json": "1a5d5f1010435ca2cf531e63ebbcb239dc708ba9248f23fb66f75b8be12da89f"}
    # read back and written again: the same bytes (the line a record was read from is never written)
    records = read_negatives(tmp_path / "out" / "hard" / NEGATIVES_FILE)
    assert [r.line for r in records] == [1, 2]
    negatives.write_mined(tmp_path / "again", records, {})
    assert (tmp_path / "again" / NEGATIVES_FILE).read_bytes() == (tmp_path / "out" / "hard" / NEGATIVES_FILE).read_bytes()
