"""The pooled-labels journey end to end, in a user's own folder and git repository (issue 51).

A Russian recipe collection with no judgments at first (an empty ``qrels/test.tsv``), the user's own
retriever (a module under ``retriever/``: word overlap, optionally stemmed, reading the first
``chars`` characters of each recipe) called as a function and, through a token, as an HTTP service on
127.0.0.1; BM25 with the Russian stemmer and stopwords. The top 3 of the three runs are pooled, an
annotator labels the pool, the labels are merged beside the collection, every run is evaluated,
compared and shown on the page. Two branches change the retriever: one indexes 20 characters of each
recipe (a real loss), one stems (a real gain); ``report --fail-on-regression`` fails the first and
passes the second, the function and its HTTP copy gated together as one comparison.

Every command runs as a user types it (``retrieval-lab ...`` words, in the repository's folder).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from dvc_repos import git_env

from retrieval_lab import cli

TOKEN = "journey-token-7f3a"
# (ingredient as the recipe says it, as a question asks for it): the first 8 questions ask in the recipe's
# own form, the last 8 in another case, which only a stemmer matches
INGREDIENTS = [("курица", "курица"), ("говядина", "говядина"), ("рыба", "рыба"), ("картофель", "картофель"),
               ("капуста", "капуста"), ("тыква", "тыква"), ("свёкла", "свёкла"), ("гречка", "гречка"),
               ("морковь", "морковью"), ("фасоль", "фасолью"), ("сыр", "сыром"), ("грибы", "грибами"),
               ("лук", "луком"), ("яйцо", "яйцами"), ("рис", "рисом"), ("тесто", "тестом")]
RETRIEVER = '''"""The user's recipe search: word overlap between question and recipe, over the first `chars` characters."""

import json
import re
from pathlib import Path

import Stemmer

CONFIG = Path(__file__).with_name("config.json")
WORD = re.compile(r"\\w+")
STEM = Stemmer.Stemmer("russian")
RECIPES = [json.loads(line) for line in Path(__file__).with_name("recipes.jsonl").read_text(encoding="utf-8").splitlines()]


def _words(text, stem):
    words = [w.lower() for w in WORD.findall(text)]
    return set(STEM.stemWords(words) if stem else words)


def search(texts, k):
    config = json.loads(CONFIG.read_text(encoding="utf-8"))
    index = [(r["_id"], _words((r["title"] + " " + r["text"])[:config["chars"]], config["stem"])) for r in RECIPES]
    out = []
    for text in texts:
        query = _words(text, config["stem"])
        scored = [(len(query & words), -i, doc) for i, (doc, words) in enumerate(index) if query & words]
        out.append([(doc, float(score)) for score, _, doc in sorted(scored, reverse=True)[:k]])
    return out
'''


def _collection(root: Path) -> None:
    recipes = [{"_id": f"r{i:02d}", "title": f"Рецепт {i}",
                "text": f"Простое блюдо на ужин. Главное: {word}, соль и перец по вкусу."}
               for i, (word, _) in enumerate(INGREDIENTS, start=1)]
    queries = [{"_id": f"q{i:02d}", "text": f"блюдо с такой основой: {asked}"}
               for i, (_, asked) in enumerate(INGREDIENTS, start=1)]
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recipes),
                                       encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries),
                                        encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n", encoding="utf-8")  # nothing judged yet


class _Service(BaseHTTPRequestHandler):
    """The HTTP copy of the user's retriever: the same function behind a token."""

    search = None

    def do_POST(self):  # http.server calls it by this name
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.send_response(401)
            self.end_headers()
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ranked = type(self).search([q["text"] for q in body["queries"]], body["k"])
        results = [{"id": q["id"], "hits": [{"id": d, "score": s} for d, s in hits]}
                   for q, hits in zip(body["queries"], ranked)]
        data = json.dumps({"results": results}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def _user(repo: Path, line: str) -> int:
    """One `retrieval-lab ...` command line, as the user types it in their repository."""
    words = shlex.split(line)
    assert words[0] == "retrieval-lab"
    return cli.main(words[1:])


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=git_env(), check=True, capture_output=True)


def _label(pool: Path, out: Path) -> int:
    """The annotator: 1 where the recipe holds the asked ingredient, else 0."""
    answer = {f"q{i:02d}": f"r{i:02d}" for i in range(1, len(INGREDIENTS) + 1)}
    lines = pool.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    q, d, s = header.index("query_id"), header.index("doc_id"), header.index("score")
    rows = [lines[0]]
    for line in lines[1:]:
        cells = line.split("\t")
        cells[s] = "1" if answer[cells[q]] == cells[d] else "0"
        rows.append("\t".join(cells))
    out.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return len(rows) - 1


def _retrieve_and_evaluate(repo: Path) -> None:
    for run in ("recipes", "recipes-http"):
        assert _user(repo, f"retrieval-lab retrieve --retriever external --external {run} --dataset recipes-ru "
                           f"--params params.yaml --output runs/{run}.trec --timing reports/{run}/timing.json") == 0
    for run in ("bm25", "recipes", "recipes-http"):
        assert _user(repo, f"retrieval-lab evaluate --dataset recipes-ru --split test --qrels qrels-test.tsv "
                           f"--run runs/{run}.trec --metrics metrics/{run}.json --reports reports/{run} "
                           "--params params.yaml") == 0


def _report(repo: Path, head: str) -> tuple[int, str, dict]:
    code = _user(repo, f"retrieval-lab report --base main --head {head} --fail-on-regression --repo . "
                       "--reports-root reports --metrics-root metrics --runs-root runs --dataset recipes-ru "
                       f"--qrels qrels-test.tsv --params params.yaml --output pr-{head}")
    md = (repo / f"pr-{head}" / "report.md").read_text(encoding="utf-8")
    html = (repo / f"pr-{head}" / "report.html").read_text(encoding="utf-8")
    return code, md, json.loads(html.split('id="page-data">', 1)[1].split("</script>", 1)[0])


@pytest.fixture
def repo(tmp_path, monkeypatch):
    repo = tmp_path / "recipes-assistant"
    (repo / "retriever").mkdir(parents=True)
    _collection(repo / "recipes-ru")
    (repo / "retriever" / "recipe_search.py").write_text(RETRIEVER, encoding="utf-8")
    (repo / "retriever" / "recipes.jsonl").write_text((repo / "recipes-ru" / "corpus.jsonl").read_text(
        encoding="utf-8"), encoding="utf-8")
    (repo / "retriever" / "config.json").write_text('{"chars": 1000, "stem": false}', encoding="utf-8")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("SEARCH_TOKEN", TOKEN)
    import importlib.util

    spec = importlib.util.spec_from_file_location("journey_recipe_search", repo / "retriever" / "recipe_search.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _Service.search = staticmethod(module.search)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Service)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    (repo / "params.yaml").write_text(f"""\
tokenizer: {{stopwords: russian, stemmer: russian}}
retrieve: {{depth: 3}}
evaluate: {{measures: [RR@3, AP@3, nDCG@3, Judged@3], permutations: 4000, seed: 5}}
compare: {{pairs: [[bm25, recipes], [recipes, recipes-http]], measure: RR@3, key_measures: [AP@3]}}
external:
  recipes: {{path: retriever, callable: "recipe_search:search", k: 3}}
  recipes-http: {{path: retriever, url: "http://127.0.0.1:{server.server_address[1]}/search", token_env: SEARCH_TOKEN,
                  k: 3}}
""", encoding="utf-8")
    yield repo
    server.shutdown()
    server.server_close()


def test_pool_label_evaluate_compare_and_gate_two_branches(repo, capsys):
    _git(repo, "init", "-q", "-b", "main")
    assert _user(repo, "retrieval-lab retrieve --retriever bm25 --dataset recipes-ru "
                       "--params params.yaml --output runs/bm25.trec") == 0
    for run in ("recipes", "recipes-http"):
        assert _user(repo, f"retrieval-lab retrieve --retriever external --external {run} --dataset recipes-ru "
                           f"--params params.yaml --output runs/{run}.trec --timing reports/{run}/timing.json") == 0
    def ranked(run):  # the rankings and scores, without the run's tag
        return [line.split()[:5] for line in (repo / "runs" / f"{run}.trec").read_text().splitlines()]

    assert ranked("recipes") == ranked("recipes-http")
    assert _user(repo, "retrieval-lab pool --runs runs/bm25.trec runs/recipes.trec runs/recipes-http.trec "
                       "--dataset recipes-ru --depth 3 --output pool.tsv") == 0
    pool = (repo / "pool.tsv").read_text(encoding="utf-8")
    assert "курица" in pool and "Рецепт 1" in pool  # the texts the annotator reads, Cyrillic intact
    assert _label(repo / "pool.tsv", repo / "labelled.tsv") > 16
    assert _user(repo, "retrieval-lab pool --merge labelled.tsv --dataset recipes-ru --max-label 1 "
                       "--output qrels-test.tsv") == 0
    # BM25 with the Russian stemmer found every recipe, so every question has its answer judged
    positives = [line for line in (repo / "qrels-test.tsv").read_text().splitlines()[1:] if line.endswith("\t1")]
    assert len(positives) == 16
    for run in ("bm25", "recipes", "recipes-http"):
        assert _user(repo, f"retrieval-lab evaluate --dataset recipes-ru --split test --qrels qrels-test.tsv "
                           f"--run runs/{run}.trec --metrics metrics/{run}.json --reports reports/{run} "
                           "--params params.yaml") == 0
    recipes = json.loads((repo / "metrics" / "recipes.json").read_text())
    assert recipes["RR@3"] == 0.5  # the 8 questions in the recipe's own words at rank 1, the 8 others missed
    assert recipes["strata_note"].startswith("no training split: strata not computed")
    assert json.loads((repo / "metrics" / "bm25.json").read_text())["RR@3"] == 1.0
    assert _user(repo, "retrieval-lab compare --reports-root reports --output metrics/compare.json "
                       "--markdown reports/compare.md --params params.yaml") == 0
    compare = json.loads((repo / "metrics" / "compare.json").read_text())
    assert compare["pairs"]["recipes vs recipes-http"]["mean_difference"] == 0.0
    assert compare["pairs"]["bm25 vs recipes"]["verdict"] == "baseline better"
    assert _user(repo, "retrieval-lab page runs/bm25.trec runs/recipes.trec --output page.html "
                       "--qrels qrels-test.tsv --dataset recipes-ru --params params.yaml") == 0
    page = json.loads((repo / "page.html").read_text(encoding="utf-8").split('id="page-data">', 1)[1]
                      .split("</script>", 1)[0])
    assert "Простое блюдо на ужин. Главное: курица, соль и перец по вкусу." in " ".join(page["docs"]["text"])
    # recipes never returned the 8 inflected questions' answers, though the project's stemmed tokens are shared
    assert page["classes"][1] == ["in_top_k"] * 8 + ["not_retrieved"] * 8
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "recipes: labels and first runs")

    # a loss: the retriever reads 30 characters of each recipe ("Рецепт 1 Простое блюдо на ужин"): every recipe
    # ties on "блюдо", so only q01-q03 keep their answer in the top 3 (at ranks 1, 2, 3)
    _git(repo, "checkout", "-q", "-b", "short-text")
    (repo / "retriever" / "config.json").write_text('{"chars": 30, "stem": false}', encoding="utf-8")
    _retrieve_and_evaluate(repo)
    _git(repo, "commit", "-qam", "index 30 characters")
    capsys.readouterr()
    code, md, page = _report(repo, "short-text")
    out = capsys.readouterr().out
    assert code == 1, md
    # RR@3: q02 1 -> 1/2, q03 1 -> 1/3, q04-q08 1 -> 0, over 16 questions: -(1/2 + 2/3 + 5) / 16 = -0.3854
    assert "REGRESSION: recipes RR@3 -0.3854" in out and "REGRESSION: recipes-http RR@3 -0.3854" in out
    # the function and its HTTP copy: identical comparisons, counted once (RR@3 = AP@3 with one answer each)
    assert "across the 1 distinct comparisons of the gate's family" in md
    assert "# Retrieval report: `short-text` against `main` (recipes-ru)" in md
    assert not any("No run file" in note for note in page["summary"]["notes"])
    assert any(r is not None for r in page["rankings"][0]) and "курица" in " ".join(page["docs"]["text"])

    # a gain: the retriever stems (back on main's code otherwise)
    _git(repo, "checkout", "-q", "main")
    _git(repo, "checkout", "-q", "-b", "stemmed")
    (repo / "retriever" / "config.json").write_text('{"chars": 1000, "stem": true}', encoding="utf-8")
    _retrieve_and_evaluate(repo)
    _git(repo, "commit", "-qam", "stem the words")
    code, md, _ = _report(repo, "stemmed")
    assert code == 0, md
    assert md.startswith("**Improvement**")
    assert json.loads((repo / "metrics" / "recipes.json").read_text())["RR@3"] == 1.0
    # a hostile try: the run changed but was not evaluated again (per-query results and metrics stale): the gate
    # held the stale results, "No change", exit 0; now each revision's results are held to its run and judgments
    _git(repo, "checkout", "-q", "-b", "stale")
    (repo / "retriever" / "config.json").write_text('{"chars": 30, "stem": false}', encoding="utf-8")
    for run in ("recipes", "recipes-http"):
        assert _user(repo, f"retrieval-lab retrieve --retriever external --external {run} --dataset recipes-ru "
                           f"--params params.yaml --output runs/{run}.trec --timing reports/{run}/timing.json") == 0
    _git(repo, "commit", "-qam", "rerun without evaluating")
    capsys.readouterr()
    code, md, _ = _report(repo, "stale")
    assert code == 3 and md.startswith("**Cannot judge**: recipes: its per-query results at stale are not what "
                                       "runs/recipes.trec gives on the judgments there (e.g. q02 RR@3: 1.0 in "
                                       "per_query.json, 0.5 from the run; stale: evaluate again)")
    # a malformed per-query entry is bad input in one line (it raised AttributeError, exit 1: the REGRESSION code)
    per_query = repo / "reports" / "recipes" / "per_query.json"
    data = json.loads(per_query.read_text())
    data["queries"]["q03"] = 5
    per_query.write_text(json.dumps(data))
    _git(repo, "commit", "-qam", "a broken per-query file")
    code = _user(repo, "retrieval-lab report --base main --head stale --fail-on-regression --repo . "
                       "--reports-root reports --metrics-root metrics --params params.yaml --output pr-broken")
    assert code == 2
    assert "stale:reports/recipes/per_query.json field 'queries.q03': expected an object with a 'measures' " \
           "object" in capsys.readouterr().err

    # the token went nowhere: no file of the repository holds it
    for path in repo.rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            assert TOKEN.encode() not in path.read_bytes(), path
