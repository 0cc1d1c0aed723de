"""The README's judging recipe and the judging page's command blocks (docs/judging.md), run exactly as written in a
user's folder: their own collection (the recipe example's, exported by its own script to ``my-collection``), two
runs of it, the pool, ``judge`` serving while scripted assessors label through its HTTP API as the page does,
the export, the comparison. The same pool labelled by the TSV route (``pool --merge``) gives the same qrels,
byte for byte, and the same RR@3 and AP@3.

The blocks are found by their doc-test marker naming this file, so a command edited in the docs is the command
run here. Stand-ins: ``dense.trec`` is BM25 without stemming (any second run serves; the recipe example's own
dense runs are judged in tests/test_recipes_example.py), and the person at the page is a script.
"""

from __future__ import annotations

import csv
import json
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from beir_fixtures import REPO
from command_runner import run_command
from judge_fixtures import Assessor

from retrieval_lab.core.data import read_qrels
from retrieval_lab.metrics import measure_run
from retrieval_lab.runs import read_run

EXAMPLE = REPO / "docs" / "examples" / "recipes"
MARKER = re.compile(r"<!-- doc-test: skip: [^\n]*covered by tests/judging/test_recipe\.py -->\n```(\w+)\n(.*?)```",
                    re.DOTALL)
SOURCES = (REPO / "README.md", REPO / "docs" / "judging.md")


def blocks() -> list[tuple[str, str, str]]:
    """(file, language, text) of every block whose marker names this test, README first."""
    return [(path.name, lang, text) for path in SOURCES for lang, text in MARKER.findall(path.read_text())]


def _key() -> dict[str, set[str]]:
    with open(EXAMPLE / "annotator_key.tsv", encoding="utf-8", newline="") as fh:
        return {row["query_id"]: set(row["recipes"].split(",")) for row in csv.DictReader(fh, delimiter="\t")}


KEY = _key()


def label_of(query: str, doc: str) -> int:
    return int(doc in KEY.get(query, set()))


class _Erring:
    """An assessor who gives the wrong label to every third pair she judges."""

    def __init__(self):
        self.judged = 0

    def __call__(self, query: str, doc: str) -> int:
        self.judged += 1
        return 1 - label_of(query, doc) if self.judged % 3 == 1 else label_of(query, doc)


def _console_script() -> str:
    return str(Path(sys.executable).parent / "retrieval-lab")


def _team(url: str) -> dict:
    """The people at the page: one annotator, or each assigned assessor (the third one labelling every third of
    her pairs otherwise) and an adjudicator who settles their disagreements."""
    first = Assessor(url, "annotator")
    with __import__("urllib.request").request.urlopen(url, timeout=30) as response:
        boot = json.loads(re.search(r'id="judge-data">(.*?)</script>', response.read().decode()).group(1))
    if not boot["assessors"]:
        queue = "sensitivity" if boot["comparison"] else "pool"
        return {"annotator": Assessor(url, "annotator", first.csrf, queue).judge_all(label_of)}
    done = {}
    for i, name in enumerate(boot["assessors"]):
        done[name] = Assessor(url, name, first.csrf).judge_all(_Erring() if i == 2 else label_of)
    judge = Assessor(url, "dana", first.csrf)
    for d in judge.get("api/agreement")["disagreements"]:
        judge.post("api/adjudicate", {"adjudicator": "dana", "query_id": d["query_id"], "doc_id": d["doc_id"],
                                      "label": label_of(d["query_id"], d["doc_id"])})
    return done


def _serve(argv: list[str]) -> dict:
    """``retrieval-lab judge`` serving, as the user starts it; the team judges; Ctrl-C stops it."""
    process = subprocess.Popen([_console_script(), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = next((line.split()[1] for line in process.stdout if line.startswith("open ")), None)
        assert url is not None, process.stderr.read()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/[\w-]{32}/", url)
        done = _team(url)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0, process.stderr.read()
    finally:
        process.kill()
    return done


def _run(lang: str, text: str, printed: list[str], served: list[dict], capsys) -> None:
    if lang == "python":
        exec(compile(text, "docs/judging.md", "exec"), {"__name__": "__doc__"})  # noqa: S102 - the docs' own block
        printed.append(capsys.readouterr().out)
        return
    for line in text.replace("\\\n", " ").splitlines():
        argv = shlex.split(line, comments=True)
        if not argv:
            continue
        assert argv[0] == "retrieval-lab", line
        if argv[1] == "judge" and "--export" not in argv and "--summary" not in argv:
            served.append(_serve(argv[1:]))
            continue
        assert run_command(argv[1], argv[2:]) == 0, (line, capsys.readouterr().err)
        printed.append(capsys.readouterr().out)


def _label_pool(pool: Path, out: Path) -> None:
    """The TSV route: the same labels typed into the pool's score column."""
    lines = pool.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    q, d, s = header.index("query_id"), header.index("doc_id"), header.index("score")
    rows = [lines[0]]
    for line in lines[1:]:
        cells = line.split("\t")
        cells[s] = str(label_of(cells[q], cells[d]))
        rows.append("\t".join(cells))
    out.write_text("\n".join(rows) + "\n", encoding="utf-8")


@pytest.fixture
def user(tmp_path, monkeypatch):
    """A user's folder: their collection (the recipe example's, exported by its script) and two runs of it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(EXAMPLE))
    import recipes_db

    recipes_db.create(EXAMPLE / "recipes.tsv", tmp_path / "recipes.db")
    recipes_db.export(tmp_path / "recipes.db", EXAMPLE / "queries.tsv", "my-collection")
    sys.modules.pop("recipes_db", None)
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", "my-collection", "--output", "bm25.trec"]) == 0
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", "my-collection", "--output", "dense.trec",
                                    "--set", "tokenizer.stemmer=null"]) == 0
    return tmp_path


def test_the_documented_judging_commands_as_written(user, capsys):
    found = blocks()
    assert [f for f, _, _ in found].count("README.md") == 1 and len(found) >= 5
    printed, served, seen = [], [], set()
    for _, lang, text in found:
        if text in seen:  # the docs repeat the README's recipe: run once
            continue
        seen.add(text)
        _run(lang, text, printed, served, capsys)

    pairs = len(Path("pool.tsv").read_text().splitlines()) - 1
    assert served[0] == {"annotator": pairs} and pairs > 50  # every pair, judgments that matter first
    assert set(served[1]) == {"alice", "bob", "carol"}  # the team's session: each judged their queue

    # the TSV route on the same pool: the same qrels, byte for byte, so the same RR@3 and AP@3
    _label_pool(Path("pool.tsv"), Path("labelled.tsv"))
    assert run_command("pool", ["--merge", "labelled.tsv", "--dataset", "my-collection", "--output",
                                "qrels-tsv.tsv"]) == 0
    assert Path("qrels-judged.tsv").read_bytes() == Path("qrels-tsv.tsv").read_bytes()
    app, tsv = read_qrels("qrels-judged.tsv"), read_qrels("qrels-tsv.tsv")
    for name in ("bm25", "dense"):
        run = read_run(f"{name}.trec")
        assert measure_run(app, run, ["RR@3", "AP@3"]).means == measure_run(tsv, run, ["RR@3", "AP@3"]).means
    table = next(out for out in printed if out.startswith("base (baseline): bm25.trec"))
    assert re.search(r"^RR@3 ", table, re.MULTILINE) and re.search(r"^AP@3 ", table, re.MULTILINE)

    # the team's export: the key's label wherever two assessors saw a pair (adjudicated where carol erred);
    # carol's own errors stand only on pairs nobody else judged
    team = {(q, d): int(r) for q, _, d, r in (line.split() for line in Path("qrels-team.trec").read_text().splitlines())}
    who: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for row in Path("qrels-team.trec.provenance.tsv").read_text().splitlines()[1:]:
        q, d, _, decided_by, assessor, *_ = row.split("\t")
        who.setdefault((q, d), set()).add((decided_by, assessor))
    assert set(team) == set(who) == {(q, d) for q, judged in tsv.items() for d in judged}
    wrong = {p for p, label in team.items() if label != label_of(*p)}
    assert wrong and all(who[p] == {("single", "carol")} for p in wrong)
    assert any(("adjudicated", "dana") in w for w in who.values())
    summary = json.loads(next(out for out in printed if out.lstrip().startswith("{")))
    assert set(summary["assessors"]) == {"alice", "bob", "carol"} and summary["agreement"]["kappa"]["name"] == "fleiss"
    assert Path("qrels-all.tsv").read_bytes() == Path("qrels-judged.tsv").read_bytes()  # the collection had none
    assert "verdict_can_change" not in printed[-1] and printed[-1].count("\n") == 3  # the Python block's prints
