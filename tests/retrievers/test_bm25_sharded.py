"""Sharded BM25 on a local Dask cluster of 2 worker processes: the merged run is the one index's, byte for byte."""

import json
import random
import re

import pytest

from retrieval_lab.core.data import Doc, write_corpus
from retrieval_lab.core.params import Params
from retrieval_lab.retrievers.bm25 import BM25Retriever
from retrieval_lab.retrievers.bm25_sharded import global_plans, merge, search_shard, shard_stats, split_corpus
from retrieval_lab.runs import format_run

distributed = pytest.importorskip("distributed")
pytest_plugins = ["dask_fixtures"]  # dask_cluster: a LocalCluster of 2 workers; killing: a worker dying mid-run

FIELDS = ["title", "text"]


def _collection(n_docs: int = 600, n_queries: int = 60):
    """Zipf-ish words (stopwords and inflected forms included), so idf and avgdl differ between shards."""
    rng = random.Random(46)
    words = [f"w{i}" for i in range(300)] + ["the", "of", "and", "running", "runs", "runner", "cells", "cell"]
    weights = [1 / (i + 2) for i in range(len(words))]
    corpus = {}
    for i in range(n_docs):
        text = " ".join(rng.choices(words, weights, k=rng.randint(0, 60)))
        title = " ".join(rng.choices(words, weights, k=rng.randint(0, 6))).title()
        corpus[f"doc{i:04d}"] = Doc(f"doc{i:04d}", title, text)
    queries = {f"q{i}": " ".join(rng.choices(words, weights, k=rng.randint(1, 6))) for i in range(n_queries)}
    queries["unknown"] = "zebra"
    return corpus, queries


def test_three_shards_on_two_local_workers_give_the_single_index_run_byte_for_byte(tmp_path, dask_cluster):
    from retrieval_lab.retrievers.bm25_sharded import sharded_search

    corpus, queries = _collection()
    params, depth = Params(), 20
    write_corpus(tmp_path / "corpus.jsonl", corpus)
    shards = split_corpus(tmp_path / "corpus.jsonl", 3, tmp_path / "shards")
    assert [len(p.read_text().splitlines()) for p in shards] == [200, 200, 200]

    single = BM25Retriever(corpus, params.tokenizer, params.bm25, FIELDS).search(queries, depth)
    expected = format_run(single, "bm25")
    assert expected.count("\n") > 1000 and single["unknown"] == {}

    _, client = dask_cluster
    assert len(client.scheduler_info()["workers"]) == 2
    merged = sharded_search(client, shards, queries, params.tokenizer, params.bm25, FIELDS, depth)
    assert format_run(merged, "bm25") == expected


def test_shard_local_statistics_would_change_the_run_global_ones_do_not(tmp_path):
    """Without step 2 (each shard its own N, df, avgdl) the scores differ: the test above can fail."""
    from retrieval_lab.retrievers.bm25 import BM25Index, query_plan
    from retrieval_lab.tokenizer import Tokenizer

    corpus, queries = _collection(300, 30)
    params, depth = Params(), 10
    docs = list(corpus.values())
    shards = [BM25Index.from_corpus(docs[a:b], params.tokenizer, FIELDS) for a, b in ((0, 100), (100, 300))]
    tokenize = Tokenizer(params.tokenizer).tokenize
    tokens = {q: tokenize(t) for q, t in queries.items()}
    expected = format_run(BM25Retriever(corpus, params.tokenizer, params.bm25, FIELDS).search(queries, depth), "bm25")

    distinct = sorted({t for ts in tokens.values() for t in ts})
    total, plans = global_plans([shard_stats(s, distinct) for s in shards], tokens)
    assert (total.documents, total.total_length) == (300, sum(int(s.lengths.sum()) for s in shards))
    runs = [search_shard(s, plans, total, params.bm25, depth) for s in shards]
    assert format_run(merge(runs, depth), "bm25") == expected

    local_runs = []
    for s in shards:
        own = {q: [(s.terms[t], w, r) for t, w, r in query_plan(s, ts, s.stats)] for q, ts in tokens.items()}
        local_runs.append(search_shard(s, own, s.stats, params.bm25, depth))
    assert format_run(merge(local_runs, depth), "bm25") != expected


def test_split_corpus_keeps_order_and_refuses_zero_shards(tmp_path):
    from retrieval_lab.core.errors import InputError

    corpus, _ = _collection(7, 1)
    write_corpus(tmp_path / "corpus.jsonl", corpus)
    paths = split_corpus(tmp_path / "corpus.jsonl", 3, tmp_path / "out")
    ids = [[json.loads(line)["_id"] for line in p.read_text().splitlines()] for p in paths]
    assert ids == [list(corpus)[:3], list(corpus)[3:5], list(corpus)[5:]]
    with pytest.raises(InputError, match="shards must be positive"):
        split_corpus(tmp_path / "corpus.jsonl", 0, tmp_path / "out2")


# ----------------------------------------------------------------------------- the commands, on the LocalCluster


def _beir(tmp_path):
    """The collection above as a BEIR folder, with what a real corpus has: a blank line and empty documents."""
    from beir_fixtures import write_beir

    corpus, queries = _collection(300, 30)
    docs = [{"_id": d.id, "title": d.title, "text": d.text} for d in corpus.values()]
    folder = write_beir(tmp_path / "beir", docs, [{"_id": q, "text": t} for q, t in queries.items()],
                        {"test": [(q, "doc0000", 1) for q in queries]})
    lines = (folder / "corpus.jsonl").read_text().splitlines(keepends=True)
    (folder / "corpus.jsonl").write_text("".join(lines[:150] + ["\n"] + lines[150:]))
    return folder


def _single_run(tmp_path, beir) -> bytes:
    from command_runner import run_command

    assert run_command("index", ["--retriever", "bm25", "--dataset", str(beir), "--output", str(tmp_path / "one")]) == 0
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--corpus", str(tmp_path / "one"),
                                    "--output", str(tmp_path / "one.trec")]) == 0
    return (tmp_path / "one.trec").read_bytes()


def test_the_sharded_commands_write_the_single_index_run_byte_for_byte(tmp_path, dask_cluster, capsys):
    from command_runner import run_command

    address, _ = dask_cluster
    beir = _beir(tmp_path)
    expected = _single_run(tmp_path, beir)
    assert expected.count(b"\n") > 500
    capsys.readouterr()
    # index: 3 shards built and saved by the workers; retrieve --corpus: each loaded by a task, searched there
    assert run_command("index", ["--retriever", "bm25", "--dataset", str(beir), "--output", str(tmp_path / "three"),
                                 "--shards", "3", "--scheduler", address]) == 0
    manifest = json.loads((tmp_path / "three" / "shards.json").read_text())
    # 300 documents in 100s; the blank line (line 151) goes with the document after it: shard 1 starts on line 101,
    # shard 2 on line 202
    assert [(s["documents"], s["first_line"]) for s in manifest["shards"]] == [(100, 1), (100, 101), (100, 202)]
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--corpus", str(tmp_path / "three"),
                                    "--output", str(tmp_path / "three.trec"), "--timing", str(tmp_path / "t.json"),
                                    "--set", f"bm25.scheduler={address}"]) == 0
    assert (tmp_path / "three.trec").read_bytes() == expected
    out = capsys.readouterr().out
    for verb in ("indexed", "loaded", "searched"):  # a progress line per shard and step
        assert sorted(re.findall(rf"shard-(\d+) {verb} \(\d of 3", out)) == ["00000", "00001", "00002"], out
    timing = json.loads((tmp_path / "t.json").read_text())
    assert len(timing["seconds"]) == 31 and "over 3 shards" in timing["summary"]["scope"]
    # retrieve --dataset: each shard's texts sent to a task, indexed in memory; no scheduler: the command starts a
    # LocalCluster of its own, and stops it
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--output", str(tmp_path / "2.trec"),
                                    "--shards", "2"]) == 0
    assert (tmp_path / "2.trec").read_bytes() == expected


def test_a_worker_killed_mid_search_is_replaced_and_the_run_is_the_same(tmp_path, dask_cluster, killing, capsys):
    from command_runner import run_command

    address, _ = dask_cluster
    beir = _beir(tmp_path)
    expected = _single_run(tmp_path, beir)
    assert run_command("index", ["--retriever", "bm25", "--dataset", str(beir), "--output", str(tmp_path / "three"),
                                 "--shards", "3", "--scheduler", address]) == 0
    capsys.readouterr()
    killing("bm25-search", once=tmp_path / "killed-once")  # the first shard search to start kills its worker
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--corpus", str(tmp_path / "three"),
                                    "--output", str(tmp_path / "three.trec"), "--scheduler", address]) == 0
    assert (tmp_path / "killed-once").exists()
    assert (tmp_path / "three.trec").read_bytes() == expected
    assert re.search(r"worker tcp://\S+ died; what it ran or held is run again elsewhere \(shard-000", capsys.readouterr().out)


def test_a_worker_that_keeps_dying_refuses_the_run_and_writes_nothing(tmp_path, dask_cluster, killing, capsys):
    from command_runner import run_command

    address, _ = dask_cluster
    beir = _beir(tmp_path)
    (tmp_path / "run.trec").write_text("q0 Q0 d0 1 1.0 earlier\n")  # the run of an earlier command
    killing("bm25-search")  # every shard search kills its worker: each is tried twice (allowed-failures 1)
    code = run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--output", str(tmp_path / "run.trec"),
                                    "--shards", "2", "--scheduler", address])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert re.fullmatch(r"error: shard-0000[01]: its worker died 2 times while running it "
                        r"\(distributed.scheduler.allowed-failures: 1\); run refused, nothing written\n", err), err
    assert (tmp_path / "run.trec").read_text() == "q0 Q0 d0 1 1.0 earlier\n"  # nothing replaced, nothing partial


def test_an_unreachable_scheduler_is_one_line_and_no_output(tmp_path, monkeypatch, capsys):
    import socket

    from command_runner import run_command

    from retrieval_lab.core import cluster

    monkeypatch.setattr(cluster, "CONNECT_SECONDS", 1)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    beir = _beir(tmp_path)
    code = run_command("index", ["--retriever", "bm25", "--dataset", str(beir), "--output", str(tmp_path / "idx"),
                                 "--shards", "2", "--scheduler", f"tcp://127.0.0.1:{port}"])
    err = capsys.readouterr().err
    assert code == 2 and re.fullmatch(rf"error: field 'bm25.scheduler': cannot reach the Dask scheduler at "
                                      rf"tcp://127.0.0.1:{port}: .*\n", err), err
    assert not (tmp_path / "idx").exists()


def test_a_bad_line_in_a_shard_is_named_at_the_corpus_line_and_a_duplicate_across_shards_is_refused(
        tmp_path, dask_cluster, capsys):
    from command_runner import run_command

    address, _ = dask_cluster
    beir = _beir(tmp_path)
    corpus = beir / "corpus.jsonl"
    lines = corpus.read_text().splitlines(keepends=True)
    good = "".join(lines)
    corpus.write_text("".join(lines[:250] + ['{"_id": "bad", "title": 3}\n'] + lines[250:]))
    argv = ["--retriever", "bm25", "--dataset", str(beir), "--output", str(tmp_path / "idx"), "--shards", "3",
            "--scheduler", address]
    assert run_command("index", argv) == 2
    assert capsys.readouterr().err == f"error: {corpus}:251 field 'title': expected a string, got int\n"  # in shard 2's file
    corpus.write_text(good + lines[19])  # doc0019 again, last (shard 2); first on line 20 (shard 0)
    assert run_command("index", argv) == 2
    assert capsys.readouterr().err == f"error: {corpus}:302 field '_id': duplicate document id 'doc0019' (first on line 20)\n"
    assert not (tmp_path / "idx").exists()
