"""The judging server's safety and durability, over real HTTP: the token, the Host check, the CSRF check on
every write, two tabs writing at once, a SIGKILL mid-session, resuming; and the export through the CLI."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from command_runner import run_command
from judge_fixtures import PAIRS, Assessor, write_tiny_pool

from retrieval_lab.core.params import Params
from retrieval_lab.judging import open_session
from retrieval_lab.judging.server import start
from retrieval_lab.judging.store import open_store


@pytest.fixture
def served(tmp_path):
    session = open_session(write_tiny_pool(tmp_path / "pool.tsv"), tmp_path / "j.sqlite", Params())
    server = start(session)
    yield server
    server.shutdown()
    server.server_close()


def _raw(server, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    """One request with exactly these headers (urllib adds its own), as another page or tool would send it."""
    con = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    con.request(method, path, body=body, headers={"Host": f"127.0.0.1:{server.port}", **(headers or {})})
    response = con.getresponse()
    out = response.status, dict(response.getheaders()), response.read()
    con.close()
    return out


def test_it_serves_this_machine_only_and_every_path_needs_the_token(served):
    assert served.server_address[0] == "127.0.0.1" and Params().judge.host == "127.0.0.1"
    token = urlsplit(served.url).path.strip("/")
    assert len(token) >= 32
    wrong = token[:-1] + ("y" if token.endswith("x") else "x")  # one character off (a token may end in x: 1 in 64)
    for path in ("/", "/api/next?assessor=a", f"/{wrong}/", f"/{wrong}/api/agreement", "/favicon.ico"):
        assert _raw(served, "GET", path)[0] == 404, path
    status, headers, html = _raw(served, "GET", f"/{token}/")
    assert status == 200 and b'id="judge-data"' in html
    csp = headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp and "unsafe" not in csp
    assert "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert headers["Referrer-Policy"] == "no-referrer"  # the token never leaves in a Referer
    assert _raw(served, "GET", f"/{token}")[1]["Location"] == f"/{token}/"
    # a page elsewhere reaching 127.0.0.1 through its own name (DNS rebinding) is refused
    status, _, _ = _raw(served, "GET", f"/{token}/", headers={"Host": f"attacker.example:{served.port}"})
    assert status == 403


def test_every_write_needs_the_csrf_token_a_json_body_and_its_own_origin(served):
    path = urlsplit(served.url).path + "api/label"
    body = json.dumps({"assessor": "mallory", "query_id": "q1", "doc_id": "d1", "label": 1}).encode()
    good = {"Content-Type": "application/json", "X-Judge-CSRF": served.csrf}
    refused = [
        ({"Content-Type": "application/json"}, 403),  # no token
        ({**good, "X-Judge-CSRF": "guess"}, 403),
        ({**good, "Origin": "http://attacker.example"}, 403),
        ({"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://attacker.example"}, 403),  # a form
        ({**good, "Content-Type": "text/plain"}, 415),
    ]
    for headers, status in refused:
        assert _raw(served, "POST", path, body, headers)[0] == status, headers
    assert _raw(served, "POST", path, b"{not json", good)[0] == 400
    assert open_store(served.session.store.path).rows() == ()  # nothing refused was written
    status, _, answer = _raw(served, "POST", path, body, {**good, "Origin": served.origin})
    assert status == 200 and json.loads(answer)["row"]["assessor"] == "mallory"
    bad_label = json.dumps({"assessor": "mallory", "query_id": "q1", "doc_id": "d1", "label": 7}).encode()
    status, _, answer = _raw(served, "POST", path, bad_label, good)
    assert status == 400 and "outside 0..2" in json.loads(answer)["error"]


@pytest.mark.parametrize("body, says", [
    (b'{"assessor": "mallory", "x": ' + b"[" * 30_000 + b"]" * 30_000 + b"}", "nested deeper than"),  # hostile M5
    (b'{"assessor": "mallory", "query_id": "q1", "doc_id": "d1", "label": ' + b"1" * 5000 + b"}",
     "body:1 field 'label': an integer of 5000 digits"),  # hostile S3
])
def test_a_body_too_deep_or_with_a_number_too_long_is_a_400_not_a_dead_request(served, capfd, body, says):
    # before: the handler's thread died on a RecursionError / ValueError: no answer, a traceback on stderr
    path = urlsplit(served.url).path + "api/label"
    headers = {"Content-Type": "application/json", "X-Judge-CSRF": served.csrf}
    status, _, answer = _raw(served, "POST", path, body, headers)
    assert status == 400 and says in json.loads(answer)["error"], answer[:300]
    assert "Traceback" not in capfd.readouterr().err
    assert open_store(served.session.store.path).rows() == ()


def test_on_another_address_any_host_is_answered_and_a_write_must_come_from_the_page_it_asks(tmp_path):
    from retrieval_lab.judging.server import JudgeServer

    session = open_session(write_tiny_pool(tmp_path / "pool.tsv"), tmp_path / "j.sqlite", Params())
    server = JudgeServer(session, "0.0.0.0", 0)  # what --host 0.0.0.0 asks for: the network may reach it
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        token = urlsplit(server.url).path
        host = {"Host": f"192.0.2.7:{server.port}"}  # the machine's address as another computer names it
        assert _raw(server, "GET", token, headers=host)[0] == 200
        assert _raw(server, "GET", "/", headers=host)[0] == 404  # the token still guards
        body = json.dumps({"assessor": "ann", "query_id": "q1", "doc_id": "d1", "label": 1}).encode()
        headers = {**host, "Content-Type": "application/json", "X-Judge-CSRF": server.csrf}
        assert _raw(server, "POST", token + "api/label", body, {**headers, "Origin": "http://evil.example"})[0] == 403
        assert _raw(server, "POST", token + "api/label", body,
                    {**headers, "Origin": f"http://192.0.2.7:{server.port}"})[0] == 200
    finally:
        server.shutdown()
        server.server_close()


def test_two_tabs_writing_at_once_lose_nothing(served):
    tabs = [Assessor(served.url, "alice", served.csrf), Assessor(served.url, "alice", served.csrf)]
    barrier, errors = threading.Barrier(2), []

    def write(tab: Assessor, label: int) -> None:
        barrier.wait()
        try:
            for i in range(12):
                tab.label(PAIRS[i % len(PAIRS)], label)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(tab, label)) for tab, label in zip(tabs, (1, 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    rows = open_store(served.session.store.path).rows()
    assert sorted(r.label for r in rows) == [1] * 12 + [2] * 12


def _start_cli(tmp_path: Path, sigint_ignored: bool = False) -> tuple[subprocess.Popen, str]:
    argv = [sys.executable, "-m", "retrieval_lab.cli", "judge", "--pool", "pool.tsv", "--db", "j.sqlite"]
    if sigint_ignored:  # as a shell script's background job (`... &`) starts it: SIGINT ignored, through exec
        argv = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *argv]
    process = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in process.stdout:
        if line.startswith("open "):
            return process, line.split()[1]
    process.wait(timeout=30)
    raise AssertionError(f"judge did not start: {process.stderr.read()}")


def test_a_sigkill_loses_no_saved_label_and_the_assessor_resumes(tmp_path):
    write_tiny_pool(tmp_path / "pool.tsv")
    process, url = _start_cli(tmp_path)
    try:
        alice = Assessor(url, "alice")
        for pair in PAIRS[:3]:
            alice.label(pair, 1)  # returned: saved
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.wait(timeout=30)
    store = open_store(tmp_path / "j.sqlite")  # checked whole, SQLite's quick check included
    assert [r.pair for r in store.rows()] == PAIRS[:3]
    process, url = _start_cli(tmp_path)
    try:
        view = Assessor(url, "alice").next()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
    assert (view["item"]["query_id"], view["item"]["doc_id"]) == PAIRS[3]  # where alice stopped
    assert view["progress"] == {"total": 6, "labelled": 3, "skipped": 0, "left": 3}


def test_sigint_stops_the_server_even_when_it_started_ignored(tmp_path):
    # Python installs no Ctrl-C handler when SIGINT comes in ignored: the server installs its own
    write_tiny_pool(tmp_path / "pool.tsv")
    process, url = _start_cli(tmp_path, sigint_ignored=True)
    try:
        Assessor(url, "alice").label(PAIRS[0], 1)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert "judge: stopped" in process.stdout.read()
    finally:
        process.kill()
    assert [r.pair for r in open_store(tmp_path / "j.sqlite").rows()] == PAIRS[:1]


def test_the_export_keeps_existing_qrels_refuses_conflicts_and_says_who_judged(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    session = open_session(write_tiny_pool(tmp_path / "pool.tsv"), "j.sqlite", Params())
    for pair, (a, b) in zip(PAIRS[:3], [(1, 1), (0, 2), (2, 0)]):
        session.label("alice", pair, a)
        session.label("bob", pair, b)
    Path("old.tsv").write_text("query-id\tcorpus-id\tscore\nq9\td9\t1\nq1\td1\t1\n")
    argv = ["--db", "j.sqlite", "--export", "qrels.tsv", "--qrels", "old.tsv"]
    assert run_command("judge", argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "2 pair(s) labelled differently and not adjudicated, first (q1, d2)" in err
    session.adjudicate("carol", PAIRS[1], 2)
    session.adjudicate("carol", PAIRS[2], 0)
    assert run_command("judge", argv) == 0, capsys.readouterr().err
    assert Path("qrels.tsv").read_text() == ("query-id\tcorpus-id\tscore\nq9\td9\t1\nq1\td1\t1\nq1\td2\t2\n"
                                             "q2\td3\t0\n")
    who = [line.split("\t") for line in Path("qrels.tsv.provenance.tsv").read_text().splitlines()]
    assert who[0] == ["query-id", "corpus-id", "score", "decided-by", "assessor", "kind", "label", "time"]
    assert [r[:7] for r in who[1:]] == [
        ["q1", "d1", "1", "agreed", "alice", "label", "1"], ["q1", "d1", "1", "agreed", "bob", "label", "1"],
        ["q1", "d2", "2", "adjudicated", "alice", "label", "0"], ["q1", "d2", "2", "adjudicated", "bob", "label", "2"],
        ["q1", "d2", "2", "adjudicated", "carol", "adjudicate", "2"],
        ["q2", "d3", "0", "adjudicated", "alice", "label", "2"], ["q2", "d3", "0", "adjudicated", "bob", "label", "0"],
        ["q2", "d3", "0", "adjudicated", "carol", "adjudicate", "0"]]
    assert run_command("judge", [*argv[:3], "trec.txt", "--format", "trec"]) == 0
    assert Path("trec.txt").read_text() == "q1 0 d1 1\nq1 0 d2 2\nq2 0 d3 0\n"
    Path("old.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t0\n")  # contradicts carol's decision
    capsys.readouterr()
    assert run_command("judge", argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "j.sqlite:" in err and "field 'score': pair (q1, d2) is already judged 0" in err


def test_the_page_script_and_style_are_package_data():
    import tomllib

    from beir_fixtures import REPO

    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert set(data["retrieval_lab.judging"]) == {"judge.js", "judge.css"}
    assert all((REPO / "src" / "retrieval_lab" / "judging" / name).is_file() for name in data["retrieval_lab.judging"])
