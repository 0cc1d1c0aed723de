"""Every query of the user's retriever accounted for, and the token kept (issue 52, item 3): each case here lost
queries with exit 0, leaked the token, grew threads or shadowed the standard library before.

Through ``retrieve --retriever external`` as the user runs it, with callables in a tmp folder and HTTP
endpoints on 127.0.0.1 (see test_external.py for the contract's ordinary cases).
"""

from __future__ import annotations

import importlib
import json
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from beir_fixtures import write_beir
from command_runner import run_command

from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import ExternalRetriever as Spec
from retrieval_lab.latency import Timing
from retrieval_lab.retrievers.external import Collected, ExternalRetriever
from retrieval_lab.runs import read_run

CORPUS = [{"_id": f"d{i}", "title": "", "text": f"text of document {i}"} for i in range(1, 5)]
QUERIES = [{"_id": f"q{i}", "text": f"question {i}"} for i in range(1, 5)]
QRELS = {"test": [(f"q{i}", f"d{i}", 1) for i in range(1, 5)]}
TOKEN = "TOPSECRET-7f3a9"

MODULE = '''
import sys

import numpy as np


def _ranked(qid):
    return [(f"d{qid[1:]}", 0.9), ("d1" if qid != "q1" else "d2", 0.5)]


def exits(texts, k, ids):
    if ids[0] == "q2":
        EXIT()
    return [_ranked(q) for q in ids]


class Poisoned(list):
    def __iter__(self):
        raise RuntimeError("cannot iterate")


def poisoned(texts, k, ids):
    return Poisoned([[]]) if ids[0] == "q3" else [_ranked(q) for q in ids]


def interrupts(texts, k, ids):
    if ids[0] == "q3":
        raise KeyboardInterrupt
    return [_ranked(q) for q in ids]


def faiss_like(texts, k, ids):
    # FAISS returns float32 arrays: zip(ids, scores) is the natural answer
    return [list(zip([f"d{q[1:]}", "d1" if q != "q1" else "d2"], np.array([0.9, 0.25], dtype=np.float32)))
            for q in ids]
'''


def _setup(tmp_path, externals: dict, module: str = MODULE):
    beir = write_beir(tmp_path / "beir", CORPUS, QUERIES, QRELS)
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "acct_mod.py").write_text(module, encoding="utf-8")
    params = tmp_path / "params.yaml"
    params.write_text(json.dumps({"external": externals}), encoding="utf-8")
    return beir, params


def _retrieve(tmp_path, beir, params, name):
    out, timing = tmp_path / f"{name}.trec", tmp_path / f"{name}.timing.json"
    code = run_command("retrieve", ["--retriever", "external", "--external", name, "--dataset", str(beir),
                                    "--split", "test", "--output", str(out), "--timing", str(timing),
                                    "--params", str(params)])
    return code, out, timing


def _callable(tmp_path, function: str, **spec) -> dict:
    return {"path": str(tmp_path / "code"), "callable": f"acct_mod:{function}", **spec}


# ----------------------------------------------------------------------------- what the user's code raises


@pytest.mark.parametrize("exit_call", ["sys.exit()", "sys.exit(3)", "raise SystemExit('bye')"])
def test_a_callable_that_exits_on_one_query_fails_that_query(tmp_path, capsys, exit_call):
    # before: the SystemExit killed the worker thread: q2 and every later query vanished, exit 0
    module = MODULE.replace("EXIT()", exit_call)
    beir, params = _setup(tmp_path, {"strict": _callable(tmp_path, "exits"),
                                     "lenient": _callable(tmp_path, "exits", max_failed=0.25)}, module)
    code, out, timing = _retrieve(tmp_path, beir, params, "strict")
    err = capsys.readouterr().err
    assert code == 2 and "1 of 4 queries failed (25.0% > 0.0% allowed): q2: raised SystemExit" in err, err
    assert not out.exists() and not timing.exists()
    code, out, timing = _retrieve(tmp_path, beir, params, "lenient")
    assert code == 0, capsys.readouterr().err
    calls = json.loads(timing.read_text())["calls"]
    assert set(read_run(out)) == {"q1", "q3", "q4"} and list(calls["failures"]) == ["q2"]
    assert calls["answered"] + calls["failed"] == calls["queries"] == 4


def test_an_answer_whose_iteration_raises_fails_its_query(tmp_path, capsys):
    beir, params = _setup(tmp_path, {"p": _callable(tmp_path, "poisoned", max_failed=0.25)})
    code, out, timing = _retrieve(tmp_path, beir, params, "p")
    assert code == 0, capsys.readouterr().err
    calls = json.loads(timing.read_text())["calls"]
    assert calls["failures"] == {"q3": "its answer raised RuntimeError when read: cannot iterate"}
    assert set(read_run(out)) == {"q1", "q2", "q4"}


def test_a_keyboard_interrupt_stops_the_run_with_a_non_zero_exit(tmp_path, capsys):
    beir, params = _setup(tmp_path, {"ki": _callable(tmp_path, "interrupts", max_failed=1.0)})
    code, out, timing = _retrieve(tmp_path, beir, params, "ki")
    err = capsys.readouterr().err
    assert code == 130 and err.startswith("error: interrupted (raised by external.ki.callable") and \
        err.count("\n") == 1, err
    assert not out.exists() and not timing.exists()


def test_a_run_that_lost_a_query_is_refused(tmp_path):
    # the invariant itself: answered + failed == sent, whatever went wrong on the way
    _setup(tmp_path, {"x": _callable(tmp_path, "faiss_like")})
    retriever = ExternalRetriever("x", Spec(**_callable(tmp_path, "faiss_like", max_failed=1.0)), {"d1"}, 3)
    collected = Collected({"q1": {"d1": 1.0}}, Timing("x", "", 1, {}, 0.0), {"q2": "HTTP 500"},
                          ("q1", "q2", "q3", "q4"))
    with pytest.raises(InputError, match=r"2 of 4 queries sent were neither answered nor failed \(q3, q4\)"):
        retriever.check(collected)


def test_numpy_scores_are_numbers(tmp_path, capsys):
    # before: "score np.float32(0.9) is not a number", the run refused
    beir, params = _setup(tmp_path, {"f": _callable(tmp_path, "faiss_like")})
    code, out, _ = _retrieve(tmp_path, beir, params, "f")
    assert code == 0, capsys.readouterr().err
    assert read_run(out)["q3"] == pytest.approx({"d3": 0.9, "d1": 0.25}) and len(read_run(out)) == 4


def test_the_users_folder_leaves_sys_path_and_shadows_no_standard_module(tmp_path, capsys, monkeypatch):
    # before: the folder stayed first on sys.path, and a colorsys.py (signal.py ...) beside the module was what the
    # next `import colorsys` anywhere in the process ran
    beir, params = _setup(tmp_path, {"f": _callable(tmp_path, "faiss_like")})
    marker = tmp_path / "shadow-ran"
    (tmp_path / "code" / "colorsys.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    code, _, _ = _retrieve(tmp_path, beir, params, "f")
    assert code == 0, capsys.readouterr().err
    assert str(tmp_path / "code") not in sys.path
    assert "colorsys" not in sys.modules or not marker.exists()
    module = importlib.import_module("colorsys")
    assert str(tmp_path) not in module.__file__ and not marker.exists()


# ----------------------------------------------------------------------------- HTTP: depth, size, deadline, token


@contextmanager
def serve(answer):
    """An HTTP server on 127.0.0.1 whose POST handler is ``answer(handler, request)``; ``server.seen`` records each
    request's Authorization header."""
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.server.seen.append(self.headers.get("Authorization"))
            answer(self, json.loads(body))

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.seen = []
    server.handle_error = lambda request, address: None
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _reply(handler, data: bytes):
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def _http(tmp_path, server, **spec):
    url = f"http://127.0.0.1:{server.server_address[1]}/search"
    return _setup(tmp_path, {"svc": {"path": str(tmp_path / "code"), "url": url, "token_env": "SEARCH_TOKEN",
                                     "retries": 0, **spec}})


def test_a_body_nested_100k_deep_is_one_line(tmp_path, capsys, monkeypatch):
    # before: RecursionError on the worker thread, an empty run, exit 0
    monkeypatch.setenv("SEARCH_TOKEN", TOKEN)
    deep = b'{"results": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with serve(lambda handler, request: _reply(handler, deep)) as server:
        beir, params = _http(tmp_path, server)
        code, out, timing = _retrieve(tmp_path, beir, params, "svc")
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "nested deeper than" in err and "Traceback" not in err, err
    assert not out.exists() and not timing.exists()


def test_an_endless_body_stops_at_the_deadline_and_leaves_no_reader(tmp_path, capsys, monkeypatch):
    # before: each abandoned attempt kept a thread reading the body for ever (2.7 GB in 13 s)
    monkeypatch.setenv("SEARCH_TOKEN", TOKEN)
    stop = threading.Event()

    def endless(handler, request):
        handler.send_response(200)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        started = time.monotonic()
        try:
            while not stop.is_set() and time.monotonic() - started < 15:  # bounded, should the client never stop
                handler.wfile.write(b"400\r\n" + b" " * 1024 + b"\r\n")  # 1 KiB chunks, every 20 ms
                handler.wfile.flush()
                time.sleep(0.02)
        except OSError:  # the client closed the connection: the deadline did its work
            pass

    before = threading.active_count()
    began = time.monotonic()
    with serve(endless) as server:
        beir, params = _http(tmp_path, server, timeout=1.0, max_failed=1.0, concurrency=2)
        code, _, _ = _retrieve(tmp_path, beir, params, "svc")
        took = time.monotonic() - began
        settled = time.monotonic() + 3
        while threading.active_count() > before + 2 and time.monotonic() < settled:  # the server and its loop
            time.sleep(0.05)
        alive = threading.active_count()
        stop.set()
    err = capsys.readouterr().err
    assert code == 2 and "no query was answered (4 failed): q1: timed out after 1 s" in err, err
    assert took < 6, took  # 4 queries, 2 at a time, 1 s each
    assert alive <= before + 2, [t.name for t in threading.enumerate()]


@pytest.mark.parametrize("token, what", [(TOKEN + "\r", "ends or starts with a line break"),
                                         (TOKEN + "\n", "ends or starts with a line break"),
                                         ("TOPSECRÉT-7f3a9", "a character outside printable ASCII"),
                                         ("TOP SECRET", "a space or control character")])
def test_a_token_that_is_not_one_line_of_ascii_is_named_never_shown(tmp_path, capsys, monkeypatch, token, what):
    # before: ValueError: Invalid header value b'Bearer TOPSECRET\r' on stderr, 0 of 4 answered, exit 0
    monkeypatch.setenv("SEARCH_TOKEN", token)
    with serve(lambda handler, request: _reply(handler, b'{"results": []}')) as server:
        beir, params = _http(tmp_path, server)
        code, out, timing = _retrieve(tmp_path, beir, params, "svc")
    printed = capsys.readouterr()
    assert code == 2 and printed.err.count("\n") == 1, printed.err
    assert "field 'external.svc.token_env': the environment variable SEARCH_TOKEN" in printed.err and what in printed.err
    assert "SECRET" not in printed.err + printed.out and server.seen == []
    assert not out.exists() and not timing.exists()


def test_an_endpoint_echoing_the_token_as_a_hit_never_writes_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SEARCH_TOKEN", TOKEN)

    def echo(handler, request):  # the Authorization header back as a document id: unknown, so an example
        token = handler.headers["Authorization"].removeprefix("Bearer ")
        results = [{"id": q["id"], "hits": [{"id": f"d{q['id'][1:]}"}, {"id": token}]} for q in request["queries"]]
        _reply(handler, json.dumps({"results": results}).encode())

    with serve(echo) as server:
        beir, params = _http(tmp_path, server)
        code, out, timing = _retrieve(tmp_path, beir, params, "svc")
    printed = capsys.readouterr()
    assert code == 0, printed.err
    calls = json.loads(timing.read_text())["calls"]
    assert calls["unknown_ids"] == 4 and calls["unknown_id_examples"][0] == ["q1", "[token redacted]"]
    for text in (out.read_text(), timing.read_text(), printed.out, printed.err):
        assert TOKEN not in text


def test_an_endpoint_echoing_the_header_into_a_bad_answer_never_shows_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SEARCH_TOKEN", TOKEN)

    def echo(handler, request):  # "Bearer <token>" holds a space: not a document id, the answer is bad input
        results = [{"id": q["id"], "hits": [{"id": handler.headers["Authorization"]}]} for q in request["queries"]]
        _reply(handler, json.dumps({"results": results}).encode())

    with serve(echo) as server:
        beir, params = _http(tmp_path, server)
        code, out, timing = _retrieve(tmp_path, beir, params, "svc")
    printed = capsys.readouterr()
    assert code == 2 and "is not a non-empty word" in printed.err and "[token redacted]" in printed.err, printed.err
    assert TOKEN not in printed.err + printed.out and not out.exists() and not timing.exists()
