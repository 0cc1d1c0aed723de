"""The user's own retriever (retrievers/external.py) through ``retrieve --retriever external``: a Python callable
and HTTP endpoints on 127.0.0.1 started and stopped here; each outcome is the one docs/own-retriever.md states."""

from __future__ import annotations

import json
import math
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from beir_fixtures import write_beir
from command_runner import run_command

from retrieval_lab.latency import percentile
from retrieval_lab.runs import read_run

CORPUS = [{"_id": f"d{i}", "title": f"doc {i}", "text": f"text of document {i}"} for i in range(1, 7)]
QUERIES = [{"_id": f"q{i}", "text": f"question {i}"} for i in range(1, 5)]
QRELS = {"test": [("q1", "d1", 1), ("q2", "d2", 1), ("q3", "d3", 1), ("q4", "d4", 1)]}
TOKEN = "s3cr3t-token-value"

MODULE = '''
import time

CALLS = []

def search(texts, k, ids=None):
    """Ranks d<n>, then d<n+1> ... for "question <n>" (scores 0.9, 0.8, ...); q3 sleeps when SLOW is set."""
    CALLS.append(list(ids))
    out = []
    for text, qid in zip(texts, ids):
        if qid in SLOW:
            time.sleep(2)
        n = int(text.split()[-1])
        out.append([(f"d{(n + j - 1) % 6 + 1}", 0.9 - 0.1 * j) for j in range(min(k, 6))])
    return out

def ids_only(texts, k):
    return [["d2", "d1", "d9"] for _ in texts]  # d9 is not in the corpus; no scores: rank order

def wrong(text):
    return []

import threading
ACTIVE, PEAK, GUARD = [0], [0], threading.Lock()

def with_ids(texts, k, ids):
    """Answers each query with the document of its own id's number; records how many calls overlap."""
    with GUARD:
        ACTIVE[0] += 1
        PEAK[0] = max(PEAK[0], ACTIVE[0])
    time.sleep(0.1)
    with GUARD:
        ACTIVE[0] -= 1
    return [[f"d{qid[1:]}"] for qid in ids]

SLOW = set()
'''


def _setup(tmp_path, externals: dict, module: str = MODULE):
    beir = write_beir(tmp_path / "beir", CORPUS, QUERIES, QRELS)
    code = tmp_path / "my_search"
    code.mkdir(exist_ok=True)
    (code / "my_search_mod.py").write_text(module, encoding="utf-8")
    params = tmp_path / "params.yaml"
    params.write_text(json.dumps({"external": externals}), encoding="utf-8")  # JSON is YAML
    return beir, params


def _retrieve(tmp_path, beir, params, name, *extra):
    out, timing = tmp_path / f"{name}.trec", tmp_path / f"{name}.timing.json"
    code = run_command("retrieve", ["--retriever", "external", "--external", name, "--dataset", str(beir),
                                    "--split", "test", "--output", str(out), "--timing", str(timing),
                                    "--params", str(params), *extra])
    return code, out, timing


def test_a_callable_ranks_every_query_in_its_own_order_and_is_timed(tmp_path, capsys):
    beir, params = _setup(tmp_path, {"mine": {"path": str(tmp_path / "my_search"),
                                              "callable": "my_search_mod:search", "k": 3,
                                              "batch_size": 2, "concurrency": 2}})
    code, out, timing = _retrieve(tmp_path, beir, params, "mine")
    assert code == 0, capsys.readouterr().err
    run = read_run(out)
    assert list(run["q1"]) == ["d1", "d2", "d3"] and run["q1"] == pytest.approx({"d1": 0.9, "d2": 0.8, "d3": 0.7})
    assert list(run["q4"]) == ["d4", "d5", "d6"]
    assert out.read_text().split()[5] == "mine"  # the run's tag is the retriever's name
    t = json.loads(timing.read_text())
    assert t["calls"]["answered"] == 4 and t["calls"]["failed"] == 0 and t["calls"]["failures"] == {}
    assert t["calls"]["kind"] == "callable" and t["calls"]["k"] == 3
    s = t["summary"]
    assert s["queries"] == 4 and s["concurrency"] == 2 and s["machine"]["cpu_count"] >= 1
    ms = sorted(v * 1000 for v in t["seconds"].values())
    assert s["p50_ms"] == pytest.approx((ms[1] + ms[2]) / 2) and s["p99_ms"] <= ms[-1]
    assert s["qps"] == pytest.approx(4 / t["wall_s"])
    assert "batch of up to 2" in s["scope"]


def test_ids_reach_a_function_that_takes_them_and_concurrency_is_bounded(tmp_path, capsys):
    import sys

    beir, params = _setup(tmp_path, {"ids": {"path": str(tmp_path / "my_search"), "callable": "my_search_mod:with_ids",
                                             "concurrency": 2}})
    code, out, timing = _retrieve(tmp_path, beir, params, "ids")
    assert code == 0, capsys.readouterr().err
    assert read_run(out) == {f"q{i}": {f"d{i}": 1.0} for i in range(1, 5)}
    assert sys.modules["my_search_mod"].PEAK[0] == 2  # four calls, never more than two at once
    seconds = json.loads(timing.read_text())
    assert seconds["wall_s"] < sum(seconds["seconds"].values())  # they did overlap


def test_ids_only_answers_are_scored_by_rank_and_unknown_ids_are_counted(tmp_path, capsys):
    beir, params = _setup(tmp_path, {"ids": {"path": str(tmp_path / "my_search"), "callable": "my_search_mod:ids_only"}})
    code, out, timing = _retrieve(tmp_path, beir, params, "ids")
    assert code == 0, capsys.readouterr().err
    run = read_run(out)
    assert run["q1"] == {"d2": 2.0, "d1": 1.0}  # rank scores of the 2 ids kept (d9 left out)
    calls = json.loads(timing.read_text())["calls"]
    assert calls["unknown_ids"] == 4 and calls["unknown_id_examples"][0] == ["q1", "d9"]
    assert calls["queries_scored_by_rank"] == 4


def test_a_callable_that_times_out_fails_its_query_and_the_limit_decides(tmp_path, capsys):
    slow = MODULE.replace("SLOW = set()", "SLOW = {'q3'}")
    spec = {"path": str(tmp_path / "my_search"), "callable": "my_search_mod:search", "timeout": 0.5,
            "concurrency": 2}
    beir, params = _setup(tmp_path, {"strict": spec, "lenient": {**spec, "max_failed": 0.25}}, slow)
    code, out, timing = _retrieve(tmp_path, beir, params, "strict")
    err = capsys.readouterr().err
    assert code == 2 and "field 'external.strict.max_failed'" in err
    assert "1 of 4 queries failed (25.0% > 0.0% allowed): q3: timed out after 0.5 s; no run written" in err
    assert not out.exists() and not timing.exists()
    code, out, timing = _retrieve(tmp_path, beir, params, "lenient")
    assert code == 0
    assert set(read_run(out)) == {"q1", "q2", "q4"}
    calls = json.loads(timing.read_text())["calls"]
    assert calls["failures"] == {"q3": "timed out after 0.5 s"} and calls["max_failed"] == 0.25
    assert calls["failed_share"] == 0.25


@pytest.mark.parametrize(("callable_", "says"), [
    ("no_such_module:search", "cannot import 'no_such_module'"),
    ("my_search_mod:missing", "'my_search_mod' has no function 'missing'"),
    ("my_search_mod:wrong", "my_search_mod:wrong(text) cannot be called as function(texts, k)"),
])
def test_a_bad_callable_is_one_line_naming_the_retriever_and_field(tmp_path, capsys, callable_, says):
    beir, params = _setup(tmp_path, {"bad": {"path": str(tmp_path / "my_search"), "callable": callable_}})
    code, out, timing = _retrieve(tmp_path, beir, params, "bad")
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "field 'external.bad.callable'" in err and says in err, err
    assert not out.exists() and not timing.exists()


def test_a_run_of_no_answered_query_is_refused_whatever_the_limit(tmp_path, capsys):
    failing = MODULE + "\ndef broken(texts, k):\n    raise RuntimeError('index not loaded')\n"
    beir, params = _setup(tmp_path, {"all": {"path": str(tmp_path / "my_search"), "callable": "my_search_mod:broken",
                                             "max_failed": 1.0}}, failing)
    code, out, timing = _retrieve(tmp_path, beir, params, "all")
    err = capsys.readouterr().err
    assert code == 2 and "no query was answered (4 failed): q1: raised RuntimeError: index not loaded" in err
    assert not out.exists() and not timing.exists()


def test_a_missing_path_is_named(tmp_path, capsys):
    beir, params = _setup(tmp_path, {"bad": {"path": str(tmp_path / "nowhere"), "callable": "m:f"}})
    code, out, _ = _retrieve(tmp_path, beir, params, "bad")
    err = capsys.readouterr().err
    assert code == 2 and "field 'external.bad.path'" in err and not out.exists()


# ----------------------------------------------------------------------------- HTTP endpoints


@contextmanager
def serve(answer):
    """An HTTP server on 127.0.0.1 (a free port) whose POST handler is ``answer(handler, request)``; every
    request's path and Authorization header are recorded in ``server.seen``."""
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.server.seen.append((self.path, self.headers.get("Authorization")))
            answer(self, json.loads(body) if body else None)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.seen = []
    server.handle_error = lambda request, address: None  # a client that gave up (timeout): not the test's error
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _reply(handler, status: int, obj=None, raw: bytes | None = None, headers: dict | None = None):
    data = raw if raw is not None else json.dumps(obj).encode()
    handler.send_response(status)
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def _hits(qid: str, n: int = 3) -> list:
    i = int(qid[1:])
    n = min(n, 6)
    return [{"id": f"d{(i + j - 1) % 6 + 1}", "score": 10.0 - j} for j in range(n)]


def _answering(handler, request):
    _reply(handler, 200, {"results": [{"id": q["id"], "hits": _hits(q["id"], request["k"])}
                                      for q in request["queries"]]})


def _url(server, path="/search"):
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


def _http_params(tmp_path, server, **spec):
    return _setup(tmp_path, {"svc": {"path": str(tmp_path / "my_search"), "url": _url(server),
                                     "token_env": "SEARCH_TOKEN", **spec}})


def test_an_endpoint_that_answers_gets_the_token_which_is_written_nowhere(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SEARCH_TOKEN", TOKEN)
    with serve(_answering) as server:
        beir, params = _http_params(tmp_path, server, k=2, concurrency=3)
        code, out, timing = _retrieve(tmp_path, beir, params, "svc")
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert {auth for _, auth in server.seen} == {f"Bearer {TOKEN}"} and len(server.seen) == 4
    run = read_run(out)
    assert run["q2"] == {"d2": 10.0, "d3": 9.0}
    for text in (out.read_text(), timing.read_text(), printed.out, printed.err):
        assert TOKEN not in text
    assert json.loads(timing.read_text())["summary"]["concurrency"] == 3


def test_a_missing_token_variable_is_refused_before_any_call(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SEARCH_TOKEN", raising=False)
    with serve(_answering) as server:
        beir, params = _http_params(tmp_path, server)
        code, out, _ = _retrieve(tmp_path, beir, params, "svc")
    assert code == 2 and "field 'external.svc.token_env'" in capsys.readouterr().err
    assert server.seen == [] and not out.exists()


def test_an_endpoint_that_times_out_on_some_queries_is_retried_then_named(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SEARCH_TOKEN", TOKEN)

    def slow_on_q2(handler, request):
        if request["queries"][0]["id"] == "q2":
            time.sleep(1.5)
        _answering(handler, request)

    with serve(slow_on_q2) as server:
        beir, params = _http_params(tmp_path, server, timeout=0.4, retries=1, backoff=0.05, max_failed=0.25)
        code, out, timing = _retrieve(tmp_path, beir, params, "svc")
    assert code == 0, capsys.readouterr().err
    assert set(read_run(out)) == {"q1", "q3", "q4"}
    calls = json.loads(timing.read_text())["calls"]
    assert calls["failures"] == {"q2": "timed out after 0.4 s (after 2 attempts)"}
    assert sum(1 for _, _ in server.seen) == 5  # q2 asked twice: one retry
    assert set(json.loads(timing.read_text())["seconds"]) == {"q1", "q3", "q4"}


def test_a_5xx_is_retried_with_backoff_and_then_answers(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SEARCH_TOKEN", TOKEN)
    failed_once = set()

    def flaky(handler, request):
        qid = request["queries"][0]["id"]
        if qid not in failed_once:
            failed_once.add(qid)
            return _reply(handler, 503, {"error": "busy"})
        _answering(handler, request)

    with serve(flaky) as server:
        beir, params = _http_params(tmp_path, server, retries=2, backoff=0.2)
        code, out, timing = _retrieve(tmp_path, beir, params, "svc")
    assert code == 0, capsys.readouterr().err
    assert len(server.seen) == 8 and set(read_run(out)) == {"q1", "q2", "q3", "q4"}
    seconds = json.loads(timing.read_text())["seconds"]
    assert min(seconds.values()) >= 0.2  # each query's time holds its backoff


def test_unknown_and_duplicate_ids_are_counted_and_duplicates_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SEARCH_TOKEN", TOKEN)

    def odd(handler, request):
        results = []
        for q in request["queries"]:
            hits = _hits(q["id"], 2) + [{"id": "zz-unknown", "score": 1.0}]
            if q["id"] == "q3":
                hits.append({"id": hits[0]["id"], "score": 0.5})  # the same document twice
            if q["id"] == "q4":
                hits[1]["score"] = math.nan  # NaN is not JSON; the server sends the token NaN below
            results.append({"id": q["id"], "hits": hits})
        _reply(handler, 200, raw=json.dumps({"results": results}).encode())

    with serve(odd) as server:
        beir, params = _http_params(tmp_path, server, max_failed=0.25)
        code, out, timing = _retrieve(tmp_path, beir, params, "svc")
    assert code == 0, capsys.readouterr().err
    run = read_run(out)
    assert set(run) == {"q1", "q2", "q4"}
    assert run["q4"] == {"d4": 2.0, "d5": 1.0}  # a NaN score: the query is ranked by the system's order
    calls = json.loads(timing.read_text())["calls"]
    assert calls["failures"] == {"q3": "document 'd3' returned twice (refused: which rank counts?)"}
    assert calls["unknown_ids"] == 3 and calls["non_finite_scores"] == 1 and calls["queries_scored_by_rank"] == 1


def test_a_redirect_to_another_port_is_not_followed_and_the_token_stays(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SEARCH_TOKEN", TOKEN)
    with serve(_answering) as elsewhere:
        def redirect(handler, request):
            if handler.path == "/search":  # same origin first: followed, with the token
                return _reply(handler, 307, {}, headers={"Location": "/moved"})
            _reply(handler, 307, {}, headers={"Location": _url(elsewhere)})

        with serve(redirect) as server:
            beir, params = _http_params(tmp_path, server, retries=0)
            code, out, timing = _retrieve(tmp_path, beir, params, "svc")
    err = capsys.readouterr().err
    assert code == 2 and "field 'external.svc.max_failed'" in err
    assert f"redirected to another origin (http://127.0.0.1:{elsewhere.server_address[1]}): not followed" in err
    assert elsewhere.seen == []  # nothing reached the other port, the token least of all
    assert [p for p, _ in server.seen].count("/moved") == 4
    assert {auth for _, auth in server.seen} == {f"Bearer {TOKEN}"}
    assert TOKEN not in err and not out.exists() and not timing.exists()


@pytest.mark.parametrize(("raw", "field"), [
    (b"<html>not json</html>", "not JSON"),
    (b'{"hits": []}', "(at response.results)"),
    (b'{"results": [{"id": "q1", "hits": [{"id": 7}]}]}', "(at response.results[0].hits[0].id)"),
])
def test_an_endpoint_answering_invalid_json_stops_the_run_in_one_line(tmp_path, capsys, monkeypatch, raw, field):
    monkeypatch.setenv("SEARCH_TOKEN", TOKEN)
    with serve(lambda handler, request: _reply(handler, 200, raw=raw)) as server:
        beir, params = _http_params(tmp_path, server)
        code, out, timing = _retrieve(tmp_path, beir, params, "svc")
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "field 'external.svc.url'" in err and field in err, err
    assert "no run written" in err and not out.exists() and not timing.exists()


def test_percentile_is_numpys_linear_rule():
    import numpy as np

    values = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0]
    for q in (0, 50, 95, 99, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    assert percentile([4.0], 99) == 4.0 and math.isnan(percentile([], 50))


def test_built_in_retrievers_write_a_timing_too(tmp_path, capsys):
    beir = write_beir(tmp_path / "beir", CORPUS, QUERIES, QRELS)
    out, timing = tmp_path / "bm25.trec", tmp_path / "bm25.timing.json"
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--output", str(out),
                                    "--timing", str(timing)]) == 0
    t = json.loads(timing.read_text())
    assert set(t["seconds"]) == {"q1", "q2", "q3", "q4"} and t["summary"]["concurrency"] == 1
    assert "calls" not in t and t["summary"]["scope"] == "search of one query"
    # the run keeps the bytes it has without a timing pass
    plain = tmp_path / "plain.trec"
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--output", str(plain)]) == 0
    assert plain.read_bytes() == out.read_bytes()
