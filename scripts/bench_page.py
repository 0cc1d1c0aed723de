"""The comparison page at scale: its size, and its load, filter, sort and query-view times in headless Chromium.

    .venv/bin/python scripts/bench_page.py [--queries 10000] [--depth 100] [--docs 50000] [--words 50]
        [--rounds 3] [--json bench-results/page.json]

A synthetic, seeded pair of runs (:func:`synthetic_pair`): ``--docs`` documents of about ``--words`` words
(MS MARCO passage length by default) over a 20,000-word vocabulary, ``--queries`` queries of 3-6 words, a
base run of ``--depth`` documents per query and a head run that keeps about 70% of them in a perturbed
order and draws the rest anew, 1-3 graded positives per query. The page is built by the library
(``page.build_page`` with nDCG@10, RR@10, R@100 and AP@100 per query, the stored texts the documents the
rankings and judgments name) and opened from ``file://`` in the system's Chromium (``/usr/bin/chromium``,
driven by playwright), once per round in a fresh tab; each figure is the median over the rounds.

Figures: ``bytes`` of the HTML (and gzipped: a CI artifact is zipped), the seconds to build and write it
in Python, and in the browser, in milliseconds: ``load`` (navigation start to the table shown, the page's
own ``window.__pageReadyAt``), ``parse`` (the named peer: ``JSON.parse`` of the same embedded data alone,
timed in the loaded page; ``load_over_parse`` is the ratio), ``search`` (typing a word into the text
filter: the table filtered, sorted and redrawn), ``sort`` (a header click), ``measure`` (another measure
chosen), ``open_query`` (a query's two rankings built at the default depth 10) and ``depth`` (both rebuilt at
the stored depth, at most 100; ``documents_shown`` counts them).
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _bench

RESULT = _bench.JsonResult("scripts/bench_page.py", ("setup", "runs", "measures", "page"))
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from retrieval_lab.comparison import compare_runs
from retrieval_lab.core.params import TokenizerParams
from retrieval_lab.metrics import measure_run
from retrieval_lab.page import RunData, build_page, runs_summary, write_page
from retrieval_lab.tokenizer import Tokenizer

MEASURES = ["nDCG@10", "RR@10", "R@100", "AP@100"]
VOCABULARY = 20_000
_SYLLABLES = [c + v for c in "bcdfghjklmnprstvz" for v in "aeiou"]


def vocabulary(size: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words: dict[str, None] = {}
    while len(words) < size:
        words["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
    return list(words)


def synthetic_pair(queries: int, depth: int, docs: int, words: int, seed: int = 7):
    """(texts, query texts, qrels, base run, head run), seeded."""
    rng = random.Random(seed)
    vocab = vocabulary(VOCABULARY, seed)
    cumulative = list(itertools.accumulate(1 / (r + 3) for r in range(len(vocab))))  # Zipf-like weights
    texts = {f"d{i}": " ".join(rng.choices(vocab, cum_weights=cumulative, k=max(5, int(rng.gauss(words, words / 4)))))
             for i in range(docs)}
    ids = list(texts)
    qtexts, qrels, base, head = {}, {}, {}, {}
    for q in range(queries):
        qid = f"q{q}"
        ranking = rng.sample(ids, depth)
        positives = rng.sample(ranking[: depth // 2], rng.randint(1, 3))
        qrels[qid] = {d: rng.randint(1, 2) for d in positives}
        source = texts[positives[0]].split()
        qtexts[qid] = " ".join(rng.sample(source, min(rng.randint(3, 6), len(source))))
        kept = [d for d in ranking if rng.random() < 0.7]
        moved = sorted(kept, key=lambda d: kept.index(d) + rng.gauss(0, 5))
        fresh = [d for d in rng.sample(ids, depth) if d not in set(kept)][: depth - len(moved)]
        base[qid] = {d: float(depth - i) for i, d in enumerate(ranking)}
        head[qid] = {d: float(depth - i) for i, d in enumerate((moved + fresh)[:depth])}
    return texts, qtexts, qrels, base, head


def build(args, path: Path) -> dict:
    start = time.perf_counter()
    texts, qtexts, qrels, base, head = synthetic_pair(args.queries, args.depth, args.docs, args.words)
    made = time.perf_counter()
    runs = [RunData(name, run, measure_run(qrels, run, MEASURES).per_query, None)
            for name, run in (("base", base), ("head", head))]
    summary = runs_summary(compare_runs(qrels, base, head, MEASURES, permutations=1000), "base", "head")
    page = build_page("bench", summary, runs, [("base", "head")], qtexts, qrels, texts.get, None,
                      Tokenizer(TokenizerParams()), args.depth)
    write_page(path, page)
    data = path.read_bytes()
    return {"bytes": len(data), "gzip_bytes": len(gzip.compress(data, 6)), "documents_stored": len(page.doc_ids),
            "build_seconds": time.perf_counter() - made, "generate_seconds": made - start,
            "probe_word": qtexts["q0"].split()[0]}


_TIMED = """async ([what, arg]) => {
    const t = performance.now();
    if (what === 'parse') JSON.parse(document.getElementById('page-data').textContent);
    if (what === 'search') { const s = document.getElementById('search'); s.value = arg;
                             s.dispatchEvent(new Event('input')); }
    if (what === 'sort') document.querySelector(`th[data-sort=${arg}]`).click();
    if (what === 'measure') { const m = document.getElementById('measure'); m.value = arg;
                              m.dispatchEvent(new Event('change')); }
    if (what === 'open_query') document.querySelector('tr.query-row').click();
    if (what === 'depth') { const d = document.getElementById('depth'); d.value = arg;
                            d.dispatchEvent(new Event('change')); }
    return performance.now() - t;
}"""


def browse(path: Path, rounds: int, word: str, depth: int) -> dict:
    from playwright.sync_api import sync_playwright

    rows: dict[str, list[float]] = {}
    with sync_playwright() as p, _bench.chromium(p, "/usr/bin/chromium") as browser:
        version = browser.version
        for _ in range(rounds):
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            requests: list[str] = []
            page.on("request", lambda r, seen=requests: seen.append(r.url))
            page.goto(path.resolve().as_uri(), timeout=120_000)
            page.wait_for_function("window.__pageReady === true", timeout=120_000)
            found = {"load": page.evaluate("window.__pageReadyAt")}
            for what, arg in (("parse", None), ("search", word), ("sort", "rbo"), ("measure", "RR@10"),
                              ("search", ""), ("open_query", None), ("depth", str(depth))):
                key = what if what != "search" or arg else "search_cleared"
                found[key] = page.evaluate(_TIMED, [what, arg])
            found["documents_shown"] = page.locator("li.doc").count()
            assert requests == [path.resolve().as_uri()], requests[:5]
            for key, value in found.items():
                rows.setdefault(key, []).append(value)
            page.close()
    out = {key: statistics.median(values) for key, values in rows.items()}
    out["rounds_ms"] = {key: [round(v, 1) for v in values] for key, values in rows.items()}
    out["load_over_parse"] = out["load"] / out["parse"]
    out["chromium"] = version
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--docs", type=int, default=50_000)
    parser.add_argument("--words", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the figures here (e.g. bench-results/page.json)")
    args = parser.parse_args(argv)
    RESULT.check(args)  # before any work: a bench may run for hours
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "page.html"
        built = build(args, path)
        browsed = browse(path, args.rounds, built.pop("probe_word"), min(args.depth, 100))
    result = {"setup": {k: getattr(args, k) for k in ("queries", "depth", "docs", "words", "rounds")},
              "runs": 2, "measures": MEASURES, "page": built, "chromium": browsed.pop("chromium"),
              "cpus": os.cpu_count(), "chromium_ms": browsed}
    RESULT.write(args.json, result)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
