"""scripts/bench_scale.py at tiny size: the growth exponent, the seeded generator, one size end to end."""

from __future__ import annotations

import pytest
from beir_fixtures import load_script

from retrieval_lab.core.data import load_dataset


@pytest.fixture(scope="module")
def bench():
    yield from load_script("bench_scale")


def test_growth_exponents(bench):
    # 10 -> 100 docs: time x10 -> k = 1; 100 -> 1000: time x100 -> k = 2; 1000 -> 4000: x2 -> k = 0.5
    assert bench.growth_exponents([10, 100, 1000, 4000], [1.0, 10.0, 1000.0, 2000.0]) == pytest.approx(
        [1.0, 2.0, 0.5])
    assert bench.growth_exponents([10], [1.0]) == []


def test_vocabulary_and_zipf_law(bench):
    words = bench.vocabulary(5000)
    assert len(set(words)) == 5000 and list(words[:3]) == ["the", "of", "and"]
    p = bench.zipf_probabilities(5000)
    # p(r) / p(r') = ((r' + q) / (r + q))^s: ranks 0 and 9 with q = 2.7, s = 1.07
    assert p.sum() == pytest.approx(1.0) and p[0] / p[9] == pytest.approx((11.7 / 2.7) ** 1.07)


def test_the_collection_is_seeded_and_realistic(bench):
    first = list(bench.synthetic_collection(300, 40, seed=3, chunk=128))
    assert first == list(bench.synthetic_collection(300, 40, seed=3, chunk=128))  # deterministic
    assert first != list(bench.synthetic_collection(300, 40, seed=4, chunk=128))
    docs = {i: (t, x) for kind, i, t, x in first if kind == "doc"}
    queries = [(i, text, positive) for kind, i, text, positive in first if kind == "query"]
    assert len(docs) == 300 and len(queries) == 40 and len({p for _, _, p in queries}) == 40
    lengths = [len(x.split()) for _, x in docs.values()]
    assert 60 < sum(lengths) / len(lengths) < 160 and min(lengths) >= 5  # texts of ~100 words
    for _, text, positive in queries:  # all but the last (off-topic) word come from the positive's text
        assert set(text.split()[:-1]) <= set(docs[positive][1].split())


def test_write_collection_is_a_valid_beir_folder(bench, tmp_path):
    folder = bench.write_collection(tmp_path / "beir", 200, 20, seed=1)
    dataset = load_dataset(folder)
    assert len(dataset.corpus) == 200 and set(dataset.qrels) == {"train", "test"}
    assert len(dataset.qrels["train"]) == len(dataset.qrels["test"]) == 10
    assert dataset.report["documents_without_text"] == 0


def test_every_step_runs_at_tiny_size(bench, tmp_path):
    folder, work = bench.write_collection(tmp_path / "beir", 400, 40, seed=2), tmp_path / "work"
    work.mkdir()
    lexical = bench.lexical_steps(str(folder), str(work))
    # a query is words of its positive: BM25 finds nearly every one
    assert lexical["test_queries_with_positive_retrieved"] >= 0.9 * lexical["test_queries"]
    steps = {**lexical["steps"], **bench.fusion_steps(str(work))["steps"]}
    mining = bench.mining_steps(str(folder), str(work))
    metrics = bench.metrics_steps(str(folder), str(work))
    assert mining["audits_passed"] == {"hard": True, "random": True}
    assert metrics["max_abs_diff"] < 1e-12  # ours and pytrec_eval agree on every query
    steps.update(mining["steps"], **metrics["steps"])
    assert set(steps) == {"load", "bm25_index", "bm25_search", "write_run", "read_run", "fuse_rrf",
                          "fuse_weighted", "mine_hard", "mine_random", "metrics", "metrics_pytrec_eval"}
    assert all(row["seconds"] > 0 and row["peak_mb"] > 0 for row in steps.values())
    faiss = bench.faiss_steps(2000, 50, dim=16)
    assert faiss["rows"]["Flat"]["recall@100_vs_flat"] == 1.0
    assert all(0.0 < row["recall@100_vs_flat"] <= 1.0 for row in faiss["rows"].values())


def test_a_repeated_step_keeps_its_fastest_call(bench, monkeypatch):
    # three calls timed 0.19 s, 0.07 s, 0.08 s (a hiccup on the first): the step records 0.07 s
    times = iter([0.19, 0.07, 0.08])
    monkeypatch.setattr(bench._bench, "timed", lambda fn: (next(times), fn()))
    step = bench._Steps()
    assert step("metrics", lambda: "result", repeats=3) == "result"
    assert step.rows["metrics"]["seconds"] == 0.07 and step.rows["metrics"]["repeats"] == 3


def test_the_msmarco_shape_has_its_passage_and_query_lengths(bench):
    items = list(bench.synthetic_collection(4000, 300, seed=5, shape=bench.MSMARCO))
    docs = {i: (t, x) for kind, i, t, x in items if kind == "doc"}
    queries = [text for kind, _, text, _ in items if kind == "query"]
    lengths = [len(x.split()) for _, x in docs.values()]
    assert all(t == "" for t, _ in docs.values())  # passages have no title
    assert 53 < sum(lengths) / len(lengths) < 59 and min(lengths) >= 5 and max(lengths) <= 300
    assert 5.5 < sum(len(q.split()) for q in queries) / len(queries) < 7.5  # 2-9 words + 1 off topic


def test_the_msmarco_steps_run_at_tiny_size(bench, tmp_path):
    folder = bench.write_collection(tmp_path / "beir", 500, 60, seed=2, shape=bench.MSMARCO)
    work = tmp_path / "work"
    work.mkdir()
    index = bench.msmarco_index(str(folder), str(work))
    assert index["postings"] > 500 and 1 <= index["postings_bytes"] / index["postings"] < 3 and index["index_mb"] > 0
    search = bench.msmarco_search(str(folder), str(work), 50)
    assert set(search["steps"]) == {"load", "bm25_load_index", "bm25_search", "write_run", "metrics"}
    assert search["means"]["nDCG@10"] > 0.8 and search["queries"] == 60  # a query is words of its positive
    peer = bench.msmarco_bm25s(str(folder), 50)
    assert set(peer["steps"]) == {"bm25s_index", "bm25s_search"} and peer["queries"] == 60
    two = bench.msmarco_search(str(folder), str(work), 50, workers=2)
    assert two["means"] == search["means"]  # same run, two processes
    row = two["steps"]["bm25_search"]
    assert row["workers"] == 2 and row["worker_peak_mb"] > 0
    assert row["peak_mb"] == row["own_peak_mb"] + 2 * row["worker_peak_mb"]  # each worker's peak counted


def test_tantivy_runs_the_msmarco_steps_and_the_rounds_alternate(bench, tmp_path, monkeypatch):
    folder = bench.write_collection(tmp_path / "beir", 400, 40, seed=3, shape=bench.MSMARCO)
    work = tmp_path / "work"
    work.mkdir()
    peer = bench.msmarco_tantivy(str(folder), str(work), 50, "stop")
    assert set(peer["steps"]) == {"tantivy_index", "tantivy_search"} and peer["queries"] == 40
    assert peer["means"]["nDCG@10"] > 0.8 and peer["index_mb"] > 0 and list(work.iterdir()) == []  # a query is words
    calls = []  # of its positive; the index folder is gone

    def isolated(fn, *args, cpu=None):  # in this process (quick); the order of the contenders recorded
        assert cpu == 0
        calls.append(fn.__name__ if fn is not bench.msmarco_tantivy else args[-1])
        return fn(*args)

    monkeypatch.setattr(bench._bench, "isolated", isolated)
    result = bench.msmarco_size(300, 30, 20, tmp_path / "runs", 1, None, peer=False, tantivy=("en_stem", "stop"),
                                repeats=2, cpu=0)
    assert calls == ["msmarco_index", "msmarco_search", "en_stem", "stop",  # then the other way round
                     "stop", "en_stem", "msmarco_index", "msmarco_search"]
    assert set(result["rounds"]) == {"ours", "en_stem", "stop"} and all(len(r) == 2 for r in result["rounds"].values())
    for analyzer, row in result["tantivy"].items():
        assert round(row["seconds"], 2) == min(result["rounds"][analyzer])  # the fastest round kept
        assert row["time_ratio"] == result["bm25_seconds"] / row["seconds"]
        assert row["peak_ratio"] == result["peak_mb"] / row["peak_mb"]
    assert round(result["bm25_seconds"], 2) == min(result["rounds"]["ours"])
    # the peak compared covers the steps the time covers (the work tantivy does too), not writing the run
    steps = result["steps"]
    compared = ("bm25_index", "bm25_load_index", "bm25_search")
    assert result["bm25_seconds"] == sum(steps[s]["seconds"] for s in compared)
    assert result["peak_mb"] == max(steps[s]["peak_mb"] for s in compared)
    assert result["peak_mb_all_steps"] == max(row["peak_mb"] for row in steps.values()) >= result["peak_mb"]
    assert {"write_run", "metrics"} <= set(steps)
