"""bm25.workers (issue 52, item 4): a worker process that dies fails the run in one line instead of leaving the
parent waiting for ever, and the number of processes is bounded by the schema."""

from __future__ import annotations

import os
import signal
import threading

import pytest
from beir_fixtures import write_beir
from command_runner import run_command

from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import MAX_WORKERS, BM25Params
from retrieval_lab.retrievers.bm25 import BM25Retriever

CORPUS = [{"_id": f"d{i}", "title": "", "text": f"document about topic {i}"} for i in range(1, 9)]
QUERIES = [{"_id": f"q{i}", "text": f"topic {i}"} for i in range(1, 9)] + [{"_id": "qx", "text": "die now"}]
QRELS = {"test": [(f"q{i}", f"d{i}", 1) for i in range(1, 9)] + [("qx", "d1", 1)]}


def test_a_killed_worker_fails_the_run_in_one_line(tmp_path, monkeypatch, capsys):
    beir = write_beir(tmp_path / "b", CORPUS, QUERIES, QRELS)
    ranked = BM25Retriever.ranked

    def dies_on_one_query(self, text, depth):  # the forked children inherit it: one of them is killed, -9
        if text == "die now" and os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return ranked(self, text, depth)

    parent = os.getpid()
    monkeypatch.setattr(BM25Retriever, "ranked", dies_on_one_query)
    out = tmp_path / "run.trec"
    codes = []
    call = threading.Thread(target=lambda: codes.append(run_command(
        "retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--output", str(out), "--set", "bm25.workers=2"])),
        daemon=True)
    call.start()
    call.join(60)  # before: multiprocessing.Pool waited for the dead child's chunk for ever
    assert not call.is_alive(), "the parent still waits for the killed worker"
    err = capsys.readouterr().err
    assert codes == [2] and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("error: bm25.workers: one of the 2 search processes died") and "no run written" in err
    assert not out.exists()


def test_the_same_search_without_the_kill_is_whole():  # the control: two workers, every query answered
    corpus = {d["_id"]: __import__("retrieval_lab").Doc(d["_id"], "", d["text"]) for d in CORPUS}
    from retrieval_lab.core.params import TokenizerParams

    retriever = BM25Retriever(corpus, TokenizerParams(), BM25Params(workers=2), ["title", "text"])
    queries = {q["_id"]: q["text"] for q in QUERIES}
    assert retriever.search(queries, 3) == BM25Retriever(corpus, TokenizerParams(), BM25Params(), ["title", "text"]
                                                         ).search(queries, 3)


@pytest.mark.parametrize("value, ok", [(1, True), (MAX_WORKERS, True), (MAX_WORKERS + 1, False), (10**6, False)])
def test_workers_are_bounded_by_the_schema(value, ok):
    if ok:
        assert BM25Params(workers=value).workers == value
    else:
        with pytest.raises(InputError, match=rf"field 'bm25.workers': must lie in \[1, {MAX_WORKERS}\]"):
            BM25Params(workers=value)
