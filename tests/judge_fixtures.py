"""What the judging tests share: a tiny pool, and a scripted assessor that judges through the HTTP API as the
page does (token in the URL, the CSRF header on every write)."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

from retrieval_lab.core.data import Doc, Query
from retrieval_lab.judgment_pool import pool, write_pool

QUERIES = {"q1": Query("q1", "printer offline"), "q2": Query("q2", "vpn drops"), "q3": Query("q3", "disk full")}
CORPUS = {
    "d1": Doc("d1", "Printer", "the printer shows offline"),
    "d2": Doc("d2", "Spooler", "restart the spooler"),
    "d3": Doc("d3", "VPN", "the vpn drops every hour"),
    "d4": Doc("d4", "MTU", "lower the MTU"),
    "d5": Doc("d5", "Disk", "the disk is full: clean it"),
    "d6": Doc("d6", "Logs", "rotate the logs"),
}
RUNS = {"a": {"q1": {"d1": 3.0, "d2": 2.0}, "q2": {"d3": 2.0, "d4": 1.0}, "q3": {"d5": 2.0, "d6": 1.0}},
        "b": {"q1": {"d2": 3.0, "d1": 1.0}, "q2": {"d4": 2.0}, "q3": {"d6": 2.0, "d5": 1.0}}}
PAIRS = [("q1", "d1"), ("q1", "d2"), ("q2", "d3"), ("q2", "d4"), ("q3", "d5"), ("q3", "d6")]  # the pool's order


def write_tiny_pool(path: Path) -> Path:
    write_pool(path, pool(RUNS, 2, QUERIES, CORPUS))
    return path


class Assessor:
    """One person at the page: every call goes through the server's HTTP API."""

    def __init__(self, url: str, name: str, csrf: str | None = None, queue: str = "pool"):
        self.url, self.name, self.queue = url, name, queue
        self.csrf = csrf or page_csrf(url)

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(self.url + path, timeout=30) as response:
            return json.load(response)

    def post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(self.url + path, data=json.dumps(body).encode("utf-8"), method="POST",
                                         headers={"Content-Type": "application/json", "X-Judge-CSRF": self.csrf})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    def next(self) -> dict:
        return self.get(f"api/next?assessor={self.name}&queue={self.queue}")

    def label(self, pair: tuple[str, str], label: int) -> dict:
        return self.post("api/label", {"assessor": self.name, "query_id": pair[0], "doc_id": pair[1],
                                       "label": label, "queue": self.queue})

    def judge_all(self, key) -> int:
        """Label every pair the server offers, ``key(query, doc)`` each, until the queue is done."""
        done = 0
        view = self.next()
        while view["item"] is not None:
            item = view["item"]
            view = self.label((item["query_id"], item["doc_id"]), key(item["query_id"], item["doc_id"]))["view"]
            done += 1
        return done


def page_csrf(url: str) -> str:
    """The CSRF token the page carries (what its script reads)."""
    with urllib.request.urlopen(url, timeout=30) as response:
        html = response.read().decode("utf-8")
    boot = re.search(r'<script type="application/json" id="judge-data">(.*?)</script>', html).group(1)
    return json.loads(boot)["csrf"]



def judge_in_app(pool_path: Path, dataset: str | Path, key, db: str | Path, max_label: int) -> int:
    """A pool judged in ``retrieval-lab judge``'s app by one scripted annotator (labels ``key(query, doc)``);
    the number of pairs labelled."""
    from retrieval_lab.core.params import Params
    from retrieval_lab.judging import LabelRange, open_session
    from retrieval_lab.judging.server import start

    session = open_session(pool_path, db, Params(), dataset=dataset, labels=LabelRange(0, max_label))
    server = start(session)
    try:
        return Assessor(server.url, "annotator", server.csrf).judge_all(key)
    finally:
        server.shutdown()
        server.server_close()
        session.store.close()
