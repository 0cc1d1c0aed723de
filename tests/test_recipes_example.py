"""The recipe case end to end (docs/own-retriever.md, docs/examples/recipes/): the user's recipes in a real SQLite
database, a FAISS index built from it with the base model by the user's own script, the user's retriever reading
both called through ``retrieve --retriever external`` at k = 3 and k = 10 and with a cheaper variant, the pool
exported for annotation, the annotator's labels merged back, RR@3 and AP@3 with intervals, and one table with
latency. The measures are checked against an independent computation from the run files and the labels.
"""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from beir_fixtures import REPO
from command_runner import run_command
from judge_fixtures import judge_in_app

from retrieval_lab.core.data import read_qrels
from retrieval_lab.metrics import measure_run
from retrieval_lab.runs import read_run

EXAMPLE = REPO / "docs" / "examples" / "recipes"
RUNS = ("minilm-k3", "minilm-k10", "minilm32-k3")


def _annotator() -> dict[str, set[str]]:
    with open(EXAMPLE / "annotator_key.tsv", encoding="utf-8", newline="") as fh:
        return {row["query_id"]: set(row["recipes"].split(",")) for row in csv.DictReader(fh, delimiter="\t")}


def _label_pool(pool: Path, out: Path, key: dict[str, set[str]]) -> int:
    """The annotator: a 0/1 in the score column of every pooled (query, recipe) row."""
    lines = pool.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    q, d, s = header.index("query_id"), header.index("doc_id"), header.index("score")
    labelled = [lines[0]]
    for line in lines[1:]:
        cells = line.split("\t")
        cells[s] = "1" if cells[d] in key[cells[q]] else "0"
        labelled.append("\t".join(cells))
    out.write_text("\n".join(labelled) + "\n", encoding="utf-8")
    return len(lines) - 1


def _rr_ap_at_3(run: dict, judged: dict[str, dict[str, int]]) -> tuple[float, float]:
    """Independent RR@3 and AP@3 (trec_eval's definitions) over queries with a judged relevant recipe."""
    rr, ap = [], []
    for qid, docs in judged.items():
        relevant = {d for d, label in docs.items() if label > 0}
        if not relevant:
            continue
        top = sorted(run.get(qid, {}).items(), key=lambda x: (x[1], x[0]), reverse=True)[:3]
        hits = [i for i, (doc, _) in enumerate(top, start=1) if doc in relevant]
        rr.append(1 / hits[0] if hits else 0.0)
        ap.append(sum((n + 1) / rank for n, rank in enumerate(hits)) / len(relevant))
    return sum(rr) / len(rr), sum(ap) / len(ap)


@pytest.fixture
def work(tmp_path, monkeypatch):
    work = tmp_path / "recipes"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("__pycache__", "*.db", "*.faiss"))
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(work))
    yield work
    for name in ("recipe_search", "recipes_db", "build_index", "summarise"):
        sys.modules.pop(name, None)


def test_the_recipe_case_end_to_end(work, capsys):
    import build_index
    import recipes_db
    import summarise

    assert recipes_db.create("recipes.tsv", "retriever/recipes.db") == 70
    with sqlite3.connect("retriever/recipes.db") as con:  # a real SQLite store, read by the user's retriever
        assert con.execute("SELECT slug FROM recipes WHERE title = 'Red lentil dal'").fetchone() == ("r11",)
    recipes_db.export("retriever/recipes.db", "queries.tsv", "beir")
    model = build_index.encoder()
    for tokens in (256, 32):
        meta = build_index.build("retriever/recipes.db", f"retriever/minilm-{tokens}.faiss", tokens, model)
        assert meta["recipes"] == 70
    assert meta["truncated"] > 0  # 32 tokens cut recipes: the cheap variant really reads less

    for name in RUNS:
        assert run_command("retrieve", ["--retriever", "external", "--external", name, "--dataset", "beir",
                                        "--output", f"runs/{name}.trec", "--timing", f"latency/{name}.json",
                                        "--params", "params.yaml"]) == 0, capsys.readouterr().err
    runs = {name: read_run(f"runs/{name}.trec") for name in RUNS}
    assert all(len(run) == 50 for run in runs.values())
    assert {len(docs) for docs in runs["minilm-k3"].values()} == {3}
    assert {len(docs) for docs in runs["minilm-k10"].values()} == {10}
    for qid, docs in runs["minilm-k3"].items():  # k = 3 is the top 3 of k = 10: one ranking, two cuts
        assert list(docs) == list(runs["minilm-k10"][qid])[:3]

    # the pool of every run's top 10 for the annotator, and the labels merged back as the test qrels
    assert run_command("pool", ["--runs", *(f"runs/{n}.trec" for n in RUNS), "--dataset", "beir", "--depth", "10",
                                "--output", "pool.tsv"]) == 0
    key = _annotator()
    pooled = _label_pool(Path("pool.tsv"), Path("labelled.tsv"), key)
    assert run_command("pool", ["--merge", "labelled.tsv", "--dataset", "beir", "--max-label", "1",
                                "--output", "qrels-test.tsv"]) == 0
    judged: dict[str, dict[str, int]] = {}
    for line in Path("qrels-test.tsv").read_text().splitlines()[1:]:
        q, d, s = line.split("\t")
        judged.setdefault(q, {})[d] = int(s)
    assert sum(len(v) for v in judged.values()) == pooled

    for name in RUNS:
        assert run_command("evaluate", ["--dataset", "beir", "--split", "test", "--qrels", "qrels-test.tsv",
                                        "--run", f"runs/{name}.trec",
                                        "--metrics", f"metrics/{name}.json", "--reports", f"reports/{name}",
                                        "--timing", f"latency/{name}.json", "--params", "params.yaml"]) == 0
    metrics = {name: json.loads(Path(f"metrics/{name}.json").read_text()) for name in RUNS}
    for name in RUNS:
        rr, ap = _rr_ap_at_3(runs[name], judged)
        assert metrics[name]["RR@3"] == pytest.approx(rr, abs=1e-12)
        assert metrics[name]["AP@3"] == pytest.approx(ap, abs=1e-12)
        assert metrics[name]["latency"]["queries"] == 50 and metrics[name]["latency"]["concurrency"] == 1

    # the same pool judged in the app (retrieval-lab judge) by a scripted annotator: the same qrels, RR@3 and AP@3
    assert judge_in_app(Path("pool.tsv"), "beir", lambda q, d: int(d in key[q]), "judgments.sqlite", 1) == pooled
    assert run_command("judge", ["--db", "judgments.sqlite", "--export", "qrels-app.tsv"]) == 0
    assert Path("qrels-app.tsv").read_bytes() == Path("qrels-test.tsv").read_bytes()
    app = read_qrels("qrels-app.tsv")
    for name in RUNS:
        assert measure_run(app, runs[name], ["RR@3", "AP@3"]).means == {m: metrics[name][m] for m in ("RR@3", "AP@3")}
    assert metrics["minilm-k3"]["RR@3"] == metrics["minilm-k10"]["RR@3"]
    assert metrics["minilm-k3"]["RR@3"] > 0.6  # the base model finds most recipes: the example is no strawman

    assert run_command("compare", ["--reports-root", "reports", "--output", "metrics/compare.json",
                                   "--markdown", "reports/compare.md", "--timing-root", "latency",
                                   "--params", "params.yaml"]) == 0
    compare = json.loads(Path("metrics/compare.json").read_text())
    same = compare["pairs"]["minilm-k3 vs minilm-k10"]
    assert same["mean_difference"] == 0.0 and same["ties"] == same["queries"]
    assert set(compare["latency"]) == {"minilm-k3 vs minilm-k10", "minilm-k3 vs minilm32-k3"}

    table = summarise.table("metrics", "reports", list(RUNS))
    for name in RUNS:
        line = next(x for x in table.splitlines() if x.startswith(f"| {name} |"))
        mean, low, high = summarise.row("metrics", "reports", name)["RR@3"]
        assert f"{mean:.3f} [{low:.3f}, {high:.3f}]" in line and low <= mean <= high
    print(table)


@pytest.mark.parametrize("drop, said", [
    ("R@10", "no 'R@10' (add it to evaluate.measures in params.yaml and run evaluate again)"),
    ("latency", "no 'latency' (evaluate the run with --timing"),
    ("RR@3", "per_query.json: no 'RR@3' (add it to evaluate.measures"),
])
def test_summarise_names_a_value_evaluate_did_not_write_in_one_line(tmp_path, drop, said):
    # what evaluate writes for one run of two queries, less one value the table shows
    latency = {"queries": 2, "concurrency": 1, "p50_ms": 4.0, "p95_ms": 5.0, "qps": 200.0}
    metrics = {"RR@3": 0.75, "AP@3": 0.5, "R@10": 1.0, "queries_evaluated": 2, "latency": latency}
    per_query = {"q1": {"RR@3": 1.0, "AP@3": 1.0}, "q2": {"RR@3": 0.5, "AP@3": 0.0}}
    metrics.pop(drop, None)
    for values in per_query.values():
        values.pop(drop, None)
    (tmp_path / "metrics").mkdir()
    (tmp_path / "reports" / "run").mkdir(parents=True)
    (tmp_path / "metrics" / "run.json").write_text(json.dumps(metrics), encoding="utf-8")
    (tmp_path / "reports" / "run" / "per_query.json").write_text(
        json.dumps({"queries": {q: {"measures": v} for q, v in per_query.items()}}), encoding="utf-8")
    done = subprocess.run([sys.executable, str(EXAMPLE / "summarise.py"), "metrics", "reports", "run"], cwd=tmp_path,
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("summarise.py: ") and said in lines[0], done.stderr
