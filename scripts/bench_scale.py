"""Cost from 10k to 1M documents: time and peak memory of each step, and its growth exponent in N.

    OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_scale.py [--sizes 10000 100000 1000000]
        [--queries 10000] [--faiss-docs 1000000] [--work-dir /tmp/bench-scale] [--json out.json]

The collection is synthetic and seeded (:func:`synthetic_collection`): words from a
Zipf-Mandelbrot law over a 200k-word vocabulary whose head is the English stop list,
titles of ~8 words and texts of ~100 (log-normal lengths, as in BEIR corpora), and
10k queries of 3-8 words drawn from one document each (that document is the query's
positive; half the queries are train, half test). At each size, each group of steps runs
in a fresh process; a step's peak memory is the process's peak RSS while it ran
(VmHWM, reset before each step through /proc/self/clear_refs).

Steps: ``load`` (read and check the BEIR folder), ``bm25_index``, ``bm25_search``
(10k queries, depth 100), ``write_run`` and ``read_run`` (1M lines at depth 100),
``fuse_rrf`` and ``fuse_weighted`` (the BM25 run with a second run), ``mine_hard``
and ``mine_random``, ``metrics`` (ours and pytrec_eval on the same run and qrels).
FAISS: ``Flat`` against ``HNSW32`` and ``IVF1024,Flat`` (nprobe 16) over
``--faiss-docs`` clustered unit vectors of 384 dimensions: build time, queries/s and
recall@100 against Flat.

``--shape msmarco``: passages of MS MARCO's lengths, ours (streamed, saved, memory-mapped index) against
bm25s and, with ``--tantivy en_stem stop``, against tantivy (scripts/_tantivy.py; one indexing and one
search thread, index on disk) at each size; ``--repeats R`` runs ours and tantivy R times, the order
alternating, and keeps each one's fastest; ``--cpu N`` binds their processes to CPU N (issue 55's goals:
ours <= 1.0x tantivy's index + search time and peak memory).

The growth exponent k of a step between sizes N1 < N2 is log(t2 / t1) / log(N2 / N1)
(time ~ N^k). Goals (2 cores): BM25 index + search over 1M documents <= 10 min with
peak <= 8 GB; every exponent <= 1.1; metrics <= 0.3x pytrec_eval.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import _bench
import numpy as np

RESULT = _bench.JsonResult("scripts/bench_scale.py", ("sizes", "queries"))
VOCABULARY = 200_000
DEPTH = 100
METRICS_REPEATS = 5  # the metrics steps take a tenth of a second: each contender's fastest of 5
GOALS = {"bm25_seconds_at_1m": 600.0, "bm25_peak_mb_at_1m": 8192.0, "exponent": 1.1, "metrics_ratio": 0.3}
MEASURES = {"nDCG@10": "ndcg_cut_10", "RR": "recip_rank", "R@100": "recall_100", "P@10": "P_10",
            "AP@100": "map_cut_100", "Success@10": "success_10"}
STOPWORDS = ["the", "of", "and", "a", "to", "in", "is", "for", "that", "with", "on", "as", "by", "are", "be",
             "at", "this", "it", "an", "or", "was", "not", "but", "if", "into", "no", "such", "then",
             "there", "these", "they", "their", "will"]  # the Zipf head: Lucene's English stop set
_SYLLABLES = [c + v for c in "bcdfghjklmnprstvz" for v in "aeiou"]  # 85 syllables


# ----------------------------------------------------------------------------- the collection


def vocabulary(size: int = VOCABULARY) -> np.ndarray:
    """``size`` distinct words, most frequent first: the stop list, then 2-4 syllable words."""
    words = list(STOPWORDS)
    n = len(_SYLLABLES)
    i = 0
    while len(words) < size:
        parts, j = [], i + n * n  # from 3 syllables up: no clash with a stop word
        while j:
            j, r = divmod(j, n)
            parts.append(_SYLLABLES[r])
        words.append("".join(parts))
        i += 1
    return np.array(words, dtype=object)


def zipf_probabilities(size: int = VOCABULARY, s: float = 1.07, q: float = 2.7) -> np.ndarray:
    """Zipf-Mandelbrot: p(rank r) proportional to 1 / (r + q)^s, r = 0, 1, ..."""
    weights = 1.0 / (np.arange(size) + q) ** s
    return weights / weights.sum()


@dataclass(frozen=True)
class Shape:
    """Lengths in words: title and text log-normal (median, sigma), clipped; queries of ``query_words`` words
    drawn from their positive (range, end excluded) plus one off-topic word. ``title_median`` 0: no title."""

    title_median: float = 7
    text_median: float = 90
    text_sigma: float = 0.6
    text_max: int = 1000
    query_words: tuple[int, int] = (3, 9)


# MS MARCO passage (v1): 8,841,823 passages without title of 56 words on average (sd ~ 20, hence a
# log-normal of median 52.8 and sigma 0.35: mean 52.8 * e^(0.35^2 / 2) = 56.1), 6,980 dev queries of
# ~6 words (here 2-9 from the passage + 1 off topic: 6.5), runs at depth 1,000
MSMARCO = Shape(title_median=0, text_median=52.8, text_sigma=0.35, text_max=300, query_words=(2, 10))
MSMARCO_PASSAGES, MSMARCO_QUERIES, MSMARCO_DEPTH = 8_841_823, 7_000, 1_000


def synthetic_collection(n_docs: int, n_queries: int, seed: int = 0, chunk: int = 20_000, shape: Shape = Shape()):
    """Yield ("doc", id, title, text) for every document, then ("query", id, text, positive id).

    Deterministic in ``seed``, ``chunk`` and ``shape``; at most one query per document (``n_queries <= n_docs``).
    """
    rng = np.random.default_rng(seed)
    words = vocabulary()
    cdf = np.cumsum(zipf_probabilities())
    query_docs = np.sort(rng.choice(n_docs, size=min(n_queries, n_docs), replace=False))
    sources, nxt = [], 0  # (document, its non-stopword token ids) of each query's positive
    for start in range(0, n_docs, chunk):
        n = min(chunk, n_docs - start)
        title_len = (np.clip(rng.lognormal(math.log(shape.title_median), 0.4, n).astype(int), 1, 30)
                     if shape.title_median else np.zeros(n, dtype=int))  # [n]
        text_len = np.clip(rng.lognormal(math.log(shape.text_median), shape.text_sigma, n).astype(int), 5,
                           shape.text_max)  # [n]
        ids = np.minimum(np.searchsorted(cdf, rng.random(int(title_len.sum() + text_len.sum()))),
                         len(words) - 1)  # [tokens of the chunk]
        tokens = words[ids]
        offset = 0
        for i in range(n):
            title = " ".join(tokens[offset:offset + title_len[i]])
            offset += title_len[i]
            text = " ".join(tokens[offset:offset + text_len[i]])
            while nxt < len(query_docs) and query_docs[nxt] == start + i:
                text_ids = ids[offset:offset + text_len[i]]
                sources.append((start + i, text_ids[text_ids >= len(STOPWORDS)]))
                nxt += 1
            offset += text_len[i]
            yield "doc", f"d{start + i}", title.capitalize(), text
    for q, (doc, content) in enumerate(sources):
        length = int(rng.integers(*shape.query_words))
        chosen = rng.choice(content, size=min(length, len(content)), replace=False) if len(content) else []
        noise = np.minimum(np.searchsorted(cdf, rng.random(1)), len(words) - 1)  # one word off topic
        yield "query", f"q{q}", " ".join(words[np.concatenate([chosen, noise]).astype(int)]), f"d{doc}"


def write_collection(folder: Path, n_docs: int, n_queries: int, seed: int = 0, shape: Shape = Shape()) -> Path:
    """The synthetic collection as a BEIR folder (qrels/train.tsv and qrels/test.tsv: even, odd queries)."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    qrels = {"train": ["query-id\tcorpus-id\tscore\n"], "test": ["query-id\tcorpus-id\tscore\n"]}
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as corpus, \
            open(folder / "queries.jsonl", "w", encoding="utf-8") as queries:
        for kind, item_id, a, b in synthetic_collection(n_docs, n_queries, seed, shape=shape):
            if kind == "doc":
                corpus.write(json.dumps({"_id": item_id, "title": a, "text": b}) + "\n")
            else:
                queries.write(json.dumps({"_id": item_id, "text": a}) + "\n")
                qrels["train" if int(item_id[1:]) % 2 == 0 else "test"].append(f"{item_id}\t{b}\t1\n")
    for split, rows in qrels.items():
        (folder / "qrels" / f"{split}.tsv").write_text("".join(rows), encoding="utf-8")
    return folder


def growth_exponents(sizes: list[int], seconds: list[float]) -> list[float]:
    """k_i = log(t_{i+1} / t_i) / log(N_{i+1} / N_i) for each step between consecutive sizes."""
    return [math.log(t2 / t1) / math.log(n2 / n1)
            for (n1, t1), (n2, t2) in itertools.pairwise(zip(sizes, seconds))]


# ----------------------------------------------------------------------------- the measured steps


class _Steps:
    """Time and peak RSS of each step in this process."""

    def __init__(self):
        self.rows: dict[str, dict] = {}

    def __call__(self, name: str, fn, repeats: int = 1, workers: int = 1):
        """``fn``'s result; its seconds are the fastest of ``repeats`` calls (a sub-second step timed once is at
        the mercy of one scheduling hiccup: the metrics step once took 0.19 s against 0.07 s for the same work).

        ``workers`` > 1: ``fn`` forks that many processes; the step's peak is this process's plus ``workers``
        times the largest child's (an upper bound: pages the children share with this process count twice)."""
        base = _bench.reset_peak()
        timings = [_bench.timed(fn) for _ in range(repeats)]
        row = {"seconds": min(t for t, _ in timings), "peak_mb": _bench.peak_mb(), "base_mb": base, "repeats": repeats}
        if workers > 1:
            import resource

            child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
            row.update(workers=workers, own_peak_mb=row["peak_mb"], worker_peak_mb=child,
                       peak_mb=row["peak_mb"] + workers * child)
        self.rows[name] = row
        return timings[-1][1]


def lexical_steps(folder: str, work: str) -> dict:
    """load, bm25_index, bm25_search, write_run, read_run (and the second run for fusion, not timed)."""
    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.core.params import Params
    from retrieval_lab.retrievers.bm25 import BM25Retriever
    from retrieval_lab.runs import read_run, write_run

    step, params = _Steps(), Params()
    dataset = step("load", lambda: load_dataset(folder))
    queries = {q: v.text for q, v in dataset.queries.items()}
    bm25 = step("bm25_index", lambda: BM25Retriever(dataset.corpus, params.tokenizer, params.bm25,
                                                    params.retrieve.fields))
    run = step("bm25_search", lambda: bm25.search(queries, DEPTH))
    step("write_run", lambda: write_run(Path(work) / "bm25.trec", run, "bm25", DEPTH))
    step("read_run", lambda: read_run(Path(work) / "bm25.trec"))
    # a second run to fuse with: each query's BM25 list reversed in score plus 50 random documents
    rng = np.random.default_rng(1)
    ids = list(dataset.corpus)
    other = {}
    for qid, docs in run.items():
        extra = {ids[j]: 0.1 * float(s) for j, s in zip(rng.integers(0, len(ids), 50), rng.random(50))}
        other[qid] = {**extra, **{d: -s for d, s in docs.items()}}
    write_run(Path(work) / "other.trec", other, "other", DEPTH)
    found = sum(1 for q, judged in dataset.qrels["test"].items() if set(judged) & set(run.get(q, {})))
    return {"steps": step.rows, "documents": len(ids), "queries": len(queries),
            "test_queries_with_positive_retrieved": found, "test_queries": len(dataset.qrels["test"])}


def fusion_steps(work: str) -> dict:
    from retrieval_lab.core.params import FusionParams
    from retrieval_lab.fusion import fuse
    from retrieval_lab.runs import read_run

    step = _Steps()
    runs = [read_run(Path(work) / "bm25.trec"), read_run(Path(work) / "other.trec")]
    for method in ("rrf", "weighted"):
        step(f"fuse_{method}", lambda method=method: fuse(runs, method, FusionParams(tune=False)))
    return {"steps": step.rows}


def mining_steps(folder: str, work: str) -> dict:
    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.core.params import MineParams
    from retrieval_lab.mining import audit_negatives, mine
    from retrieval_lab.runs import read_run

    step = _Steps()
    dataset = load_dataset(folder)
    run = read_run(Path(work) / "bm25.trec")
    params = MineParams(count=3, range_min=2, range_max=30)
    out = {}
    for strategy in ("hard", "random"):
        records = step(f"mine_{strategy}", lambda strategy=strategy: mine(run, dataset, params, strategy))
        out[strategy] = audit_negatives(records, dataset, params.count, strategy).passed
    return {"steps": step.rows, "audits_passed": out}


def metrics_steps(folder: str, work: str) -> dict:
    import pytrec_eval

    from retrieval_lab.core.data import read_qrels
    from retrieval_lab.metrics import measure_run
    from retrieval_lab.runs import read_run

    qrels = {}
    for split in ("train", "test"):
        qrels.update(read_qrels(Path(folder) / "qrels" / f"{split}.tsv"))
    run = read_run(Path(work) / "bm25.trec")
    step = _Steps()
    ours = step("metrics", lambda: measure_run(qrels, run, list(MEASURES)), METRICS_REPEATS)
    theirs = step("metrics_pytrec_eval", lambda: pytrec_eval.RelevanceEvaluator(
        qrels, set(MEASURES.values())).evaluate(run), METRICS_REPEATS)
    diff = max(abs(ours.per_query[q][m] - theirs[q][t]) for q in theirs for m, t in MEASURES.items())
    return {"steps": step.rows, "max_abs_diff": diff, "means": ours.means}


def faiss_steps(n_docs: int, n_queries: int, dim: int = 384, seed: int = 0) -> dict:
    """Flat, HNSW32 and IVF1024,Flat over clustered unit vectors: build s, queries/s, recall@100 vs Flat."""
    import faiss

    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((1000, dim)).astype(np.float32)  # [1000, dim] topics

    def points(n):
        out = np.empty((n, dim), dtype=np.float32)
        for start in range(0, n, 100_000):
            m = min(100_000, n - start)
            block = centers[rng.integers(0, len(centers), m)] + 0.9 * rng.standard_normal((m, dim), np.float32)
            out[start:start + m] = block / np.linalg.norm(block, axis=1, keepdims=True)
        return out

    docs, queries = points(n_docs), points(n_queries)
    rows, truth = {}, None
    for factory, probe in (("Flat", None), ("HNSW32", 64), ("IVF1024,Flat", 16)):
        base = _bench.reset_peak()
        start = time.perf_counter()
        index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
        if not index.is_trained:
            index.train(docs[rng.choice(n_docs, size=min(n_docs, 100 * 1024), replace=False)])
        index.add(docs)
        build = time.perf_counter() - start
        if factory.startswith("HNSW"):
            index.hnsw.efSearch = probe
        elif probe is not None:
            index.nprobe = probe
        start = time.perf_counter()
        _, found = index.search(queries, DEPTH)  # [q, 100]
        search = time.perf_counter() - start
        if truth is None:
            truth = found
        recall = float(np.mean([len(set(a) & set(b)) / DEPTH for a, b in zip(found, truth)]))
        rows[factory] = {"build_seconds": build, "search_seconds": search, "queries_per_second": n_queries / search,
                         "recall@100_vs_flat": recall, "peak_mb": _bench.peak_mb(), "base_mb": base,
                         "search_param": probe}
        del index
    return {"documents": n_docs, "queries": n_queries, "dim": dim, "rows": rows}


# ----------------------------------------------------------------------------- MS MARCO passage shape (issue 46)

_REFERENCE = """
import sys
from retrieval_lab.core.data import load_dataset
from retrieval_lab.core.params import Params
from retrieval_lab.retrievers.bm25 import BM25Retriever
from retrieval_lab.runs import write_run
dataset, params = load_dataset(sys.argv[1]), Params()
bm25 = BM25Retriever(dataset.corpus, params.tokenizer, params.bm25, params.retrieve.fields)
write_run(sys.argv[2], bm25.search({q: v.text for q, v in dataset.queries.items()}, int(sys.argv[3])), "bm25",
          int(sys.argv[3]))
"""


def msmarco_index(folder: str, work: str) -> dict:
    """``bm25_index``: one streamed pass over corpus.jsonl (no text kept), chunks spilled to disk, saved."""
    from retrieval_lab.core.data import corpus_file, iter_corpus
    from retrieval_lab.core.params import Params
    from retrieval_lab.retrievers.bm25 import build_in

    step, params = _Steps(), Params()
    fields = params.retrieve.fields
    out = Path(work) / "index"
    out.mkdir()
    index = step("bm25_index", lambda: build_in(out, ((d.id, d.content(fields)) for d in
                                                      iter_corpus(corpus_file(folder))), params.tokenizer, fields))
    return {"steps": step.rows, "index_mb": sum(f.stat().st_size for f in out.iterdir()) / 2**20,
            "postings": index.postings_count, "terms": len(index.vocab), "postings_bytes": len(index.postings)}


def msmarco_search(folder: str, work: str, depth: int, workers: int = 1) -> dict:
    """``load`` (queries, qrels), ``bm25_load_index`` (memory-mapped), ``bm25_search`` (``workers`` forked
    processes: bm25.workers), ``write_run``, ``metrics``."""
    import dataclasses

    from retrieval_lab.core.data import read_qrels, read_queries
    from retrieval_lab.core.params import Params
    from retrieval_lab.metrics import measure_run
    from retrieval_lab.retrievers.bm25 import BM25Index, BM25Retriever
    from retrieval_lab.runs import write_run

    step, params = _Steps(), Params()
    queries, qrels = step("load", lambda: ({q: v.text for q, v in read_queries(Path(folder) / "queries.jsonl").items()},
                                           read_qrels(Path(folder) / "qrels" / "test.tsv")))
    index = step("bm25_load_index", lambda: BM25Index.load(Path(work) / "index"))
    retriever = BM25Retriever.from_index(index, dataclasses.replace(params.bm25, workers=workers))
    run = step("bm25_search", lambda: retriever.search(queries, depth), workers=workers)
    step("write_run", lambda: write_run(Path(work) / "bm25.trec", run, "bm25", depth))
    means = step("metrics", lambda: measure_run(qrels, run, ["nDCG@10", "RR@10", f"R@{depth}"]).means)
    return {"steps": step.rows, "means": means, "queries": len(queries)}


def msmarco_bm25s(folder: str, depth: int) -> dict:
    """bm25s doing the same work: read the texts, tokenize (its own, same stopwords and stemmer), index; then
    retrieve every query at ``depth`` into a run."""
    import bm25s
    import Stemmer

    from retrieval_lab.core.data import corpus_file, iter_corpus, read_queries
    from retrieval_lab.core.params import Params

    step, params = _Steps(), Params()
    stemmer = Stemmer.Stemmer("english")
    ids: list[str] = []

    def index():
        texts = []
        for doc in iter_corpus(corpus_file(folder)):
            ids.append(doc.id)
            texts.append(doc.content(params.retrieve.fields))
        model = bm25s.BM25(k1=params.bm25.k1, b=params.bm25.b, method="lucene")
        model.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
        return model

    model = step("bm25s_index", index)
    queries = {q: v.text for q, v in read_queries(Path(folder) / "queries.jsonl").items()}

    def search():
        qids = list(queries)
        tokens = bm25s.tokenize([queries[q] for q in qids], stopwords="en", stemmer=stemmer, show_progress=False)
        rows, scores = model.retrieve(tokens, k=min(depth, len(ids)), show_progress=False)
        return {q: {ids[j]: float(v) for j, v in zip(r, sc) if v > 0} for q, r, sc in zip(qids, rows, scores)}

    run = step("bm25s_search", search)
    return {"steps": step.rows, "queries": len(run)}


def msmarco_tantivy(folder: str, work: str, depth: int, analyzer: str) -> dict:
    """tantivy doing the same work (scripts/_tantivy.py, one indexing and one search thread): ``tantivy_index`` (one
    streamed pass over corpus.jsonl into an index folder), ``tantivy_search`` (every query at ``depth`` into a
    run); the run's nDCG@10, untimed."""
    import _tantivy
    import tantivy  # noqa: F401  # imported before the timed steps, as ours' modules are

    from retrieval_lab.core.data import corpus_file, iter_corpus, read_qrels, read_queries
    from retrieval_lab.core.params import Params
    from retrieval_lab.metrics import measure_run
    from retrieval_lab.tokenizer import load_stopwords

    step, params = _Steps(), Params()
    stopwords = load_stopwords(params.tokenizer.stopwords)
    out = Path(work) / f"tantivy-{analyzer}"
    out.mkdir()
    ids: list[str] = []

    def texts():
        for doc in iter_corpus(corpus_file(folder)):
            ids.append(doc.id)
            yield doc.content(params.retrieve.fields)

    index = step("tantivy_index", lambda: _tantivy.build(texts(), analyzer, stopwords, out))
    queries = {q: v.text for q, v in read_queries(Path(folder) / "queries.jsonl").items()}
    run = step("tantivy_search", lambda: _tantivy.search(index, ids, queries, depth))
    means = measure_run(read_qrels(Path(folder) / "qrels" / "test.tsv"), run, ["nDCG@10"]).means
    index_mb = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 2**20
    shutil.rmtree(out)
    return {"steps": step.rows, "queries": len(run), "means": means, "index_mb": index_mb}


def _ours_msmarco(beir: str, work: Path, depth: int, workers: int, cpu: int | None = None) -> tuple[dict, dict]:
    """Our index and search, each in a fresh process (on CPU ``cpu`` only, if given): (steps, the groups' other
    outputs)."""
    ours, steps = {}, {}
    if (work / "index").exists():
        shutil.rmtree(work / "index")  # an earlier round's
    for name, fn, args in (("index", msmarco_index, (beir, str(work))),
                           ("search", msmarco_search, (beir, str(work), depth, workers))):
        out = _bench.isolated(fn, *args, cpu=cpu)
        steps.update(out.pop("steps"))
        ours[name] = out
    return steps, ours


# the work each peer does too: index, open, search into a run held in memory. Writing the run and measuring it
# are ours alone (no peer writes a file), so they count in neither the time nor the peak compared.
_COMPARED = ("bm25_index", "bm25_load_index", "bm25_search")


def _ours_seconds(steps: dict) -> float:
    return sum(steps[name]["seconds"] for name in _COMPARED)


def _ours_peak(steps: dict) -> float:
    return max(steps[name]["peak_mb"] for name in _COMPARED)


def _tantivy_seconds(steps: dict) -> float:
    return steps["tantivy_index"]["seconds"] + steps["tantivy_search"]["seconds"]


def msmarco_size(n_docs: int, n_queries: int, depth: int, work_dir: Path, seed: int, reference: str | None,
                 peer: bool = True, workers: int = 1, tantivy: tuple[str, ...] = (), repeats: int = 1,
                 cpu: int | None = None) -> dict:
    """Ours (and each tantivy analyzer in ``tantivy``) ``repeats`` times, the order alternating between rounds so
    that drifting load on shared cores falls on each alike; each contender's fastest round is kept; with ``cpu``,
    each of their processes runs on that one CPU only. bm25s once."""
    folder = work_dir / f"msmarco{n_docs}"
    if folder.exists():
        shutil.rmtree(folder)
    start = time.perf_counter()
    write_collection(folder / "beir", n_docs, n_queries, seed, MSMARCO)
    result = {"documents": n_docs, "generate_seconds": time.perf_counter() - start,
              "corpus_mb": (folder / "beir" / "corpus.jsonl").stat().st_size / 2**20}
    work = folder / "work"
    work.mkdir()
    beir = str(folder / "beir")
    contenders = ["ours", *tantivy]
    best: dict[str, dict] = {}
    rounds: dict[str, list[float]] = {name: [] for name in contenders}
    for round_ in range(repeats):
        for name in contenders if round_ % 2 == 0 else contenders[::-1]:
            if name == "ours":
                steps, ours = _ours_msmarco(beir, work, depth, workers, cpu)
                row = {"steps": steps, "ours": ours, "seconds": _ours_seconds(steps)}
            else:
                row = _bench.isolated(msmarco_tantivy, beir, str(work), depth, name, cpu=cpu)
                row["seconds"] = _tantivy_seconds(row["steps"])
            rounds[name].append(round(row["seconds"], 2))
            if name not in best or row["seconds"] < best[name]["seconds"]:
                best[name] = row
            print(f"  {n_docs:>9,} passages: {name if name == 'ours' else 'tantivy ' + name} done "
                  f"({row['seconds']:.1f} s)", flush=True)
    steps, ours = best["ours"]["steps"], best["ours"]["ours"]
    seconds, peak = _ours_seconds(steps), _ours_peak(steps)
    result.update(steps=steps, ours=ours, bm25_seconds=seconds, peak_mb=peak,
                  peak_mb_all_steps=max(row["peak_mb"] for row in steps.values()))
    if repeats > 1:
        result["rounds"] = rounds
    if tantivy:
        result["tantivy"] = {}
        for analyzer in tantivy:
            row = best[analyzer]
            their_peak = max(step["peak_mb"] for step in row["steps"].values())
            result["tantivy"][analyzer] = {**row, "peak_mb": their_peak, "time_ratio": seconds / row["seconds"],
                                           "peak_ratio": peak / their_peak}
    if peer:
        peer = _bench.isolated(msmarco_bm25s, beir, depth)
        print(f"  {n_docs:>9,} passages: bm25s done", flush=True)
        peer_seconds = peer["steps"]["bm25s_index"]["seconds"] + peer["steps"]["bm25s_search"]["seconds"]
        peer_peak = max(row["peak_mb"] for row in peer["steps"].values())
        result.update(bm25s=peer["steps"], bm25s_seconds=peer_seconds, time_ratio=seconds / peer_seconds,
                      bm25s_peak_mb=peer_peak, peak_ratio=peak / peer_peak)
    if reference:  # the run of the code before issue 46 (a copy of its src/ folder) on the same collection
        import subprocess
        import sys

        path = work / "reference.trec"
        subprocess.run([sys.executable, "-c", _REFERENCE, beir, str(path), str(depth)], check=True,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": reference, "OMP_NUM_THREADS": "1"})
        result["identical_to_reference"] = path.read_bytes() == (work / "bm25.trec").read_bytes()
        print(f"  {n_docs:>9,} passages: run identical to the reference's: {result['identical_to_reference']}")
    shutil.rmtree(folder)
    return result


def msmarco_main(args) -> None:
    work_dir = Path(args.work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    load = {"start": list(os.getloadavg())}
    results = [msmarco_size(n, args.queries, args.depth, work_dir, args.seed,
                            args.reference_src if n <= args.reference_max else None,
                            args.peer_max is None or n <= args.peer_max, args.workers, tuple(args.tantivy),
                            args.repeats, args.cpu) for n in args.sizes]
    load["end"] = list(os.getloadavg())
    names = list(results[0]["steps"])
    table = {name: {"seconds": [r["steps"][name]["seconds"] for r in results],
                    "peak_mb": [r["steps"][name]["peak_mb"] for r in results]} for name in names}
    if all("bm25s" in r for r in results):
        for name in ("bm25s_index", "bm25s_search"):
            table[name] = {"seconds": [r["bm25s"][name]["seconds"] for r in results],
                           "peak_mb": [r["bm25s"][name]["peak_mb"] for r in results]}
    for row in table.values():
        row["exponents"] = growth_exponents(args.sizes, row["seconds"]) if len(args.sizes) > 1 else []
        # what the largest measured size and the last exponent give for MS MARCO's size: NOT a measurement
        k = row["exponents"][-1] if row["exponents"] else 1.0
        row["extrapolated_seconds_at_msmarco"] = row["seconds"][-1] * (MSMARCO_PASSAGES / args.sizes[-1]) ** max(k, 1.0)
    print(markdown(args.sizes, {n: {k: v for k, v in r.items() if k != "extrapolated_seconds_at_msmarco"}
                                for n, r in table.items()}))
    for r in results:
        print(f"{r['documents']:,} passages: ours {r['bm25_seconds']:.1f} s, peak {r['peak_mb']:,.0f} MiB" + (
              f"; bm25s {r['bm25s_seconds']:.1f} s, peak {r['bm25s_peak_mb']:,.0f} MiB: time {r['time_ratio']:.2f}x, "
              f"peak {r['peak_ratio']:.2f}x" if "bm25s" in r else "") + "".join(
              f"; tantivy {a} {t['seconds']:.1f} s, peak {t['peak_mb']:,.0f} MiB: time {t['time_ratio']:.2f}x, peak "
              f"{t['peak_ratio']:.2f}x" for a, t in r.get("tantivy", {}).items()))
    print(f"load average (1, 5, 15 min): start {load['start']}, end {load['end']}")
    out = {"shape": "msmarco", "sizes": args.sizes, "queries": args.queries, "depth": args.depth, "workers": args.workers,
           "msmarco_passages": MSMARCO_PASSAGES, "table": table, "results": results,
           "goals": {"index_seconds_at_msmarco": 900, "search_seconds_at_msmarco": 300, "peak_mb": 12 * 1024,
                     "exponent": 1.1, "time_ratio": 0.9, "peak_ratio": 1.0},
           "measured_at_msmarco_size": MSMARCO_PASSAGES in args.sizes, "machine": machine()}
    if args.tantivy:  # issue 55: ours <= 1.0x each tantivy analyzer's time and peak, in the same run
        out.update(tantivy_goals={"time_ratio": 1.0, "peak_ratio": 1.0}, repeats=args.repeats, load_average=load,
                   cpu=args.cpu)
    RESULT.write(args.json, out)


# ----------------------------------------------------------------------------- driver


def run_size(n_docs: int, n_queries: int, work_dir: Path, seed: int) -> dict:
    folder = work_dir / f"n{n_docs}"
    if folder.exists():
        shutil.rmtree(folder)
    start = time.perf_counter()
    write_collection(folder / "beir", n_docs, n_queries, seed)
    generated = time.perf_counter() - start
    work = folder / "work"
    work.mkdir()
    result = {"documents": n_docs, "generate_seconds": generated,
              "corpus_mb": (folder / "beir" / "corpus.jsonl").stat().st_size / 2**20}
    steps: dict[str, dict] = {}
    for fn, args in ((lexical_steps, (str(folder / "beir"), str(work))), (fusion_steps, (str(work),)),
                     (mining_steps, (str(folder / "beir"), str(work))), (metrics_steps, (str(folder / "beir"),
                                                                                        str(work)))):
        out = _bench.isolated(fn, *args)
        steps.update(out.pop("steps"))
        result[fn.__name__] = out
        print(f"  {n_docs:>9,} docs: {fn.__name__} done", flush=True)
    result["steps"] = steps
    shutil.rmtree(folder)
    return result


def summarise(sizes: list[int], results: list[dict]) -> dict:
    names = list(results[0]["steps"])
    table = {}
    for name in names:
        seconds = [r["steps"][name]["seconds"] for r in results]
        table[name] = {"seconds": seconds, "peak_mb": [r["steps"][name]["peak_mb"] for r in results],
                       "exponents": growth_exponents(sizes, seconds) if len(sizes) > 1 else []}
    return table


def markdown(sizes: list[int], table: dict) -> str:
    head = ["step"] + [f"{n:,} docs: s" for n in sizes] + [f"peak MiB at {sizes[-1]:,}"]
    head += [f"k {a:,}->{b:,}" for a, b in itertools.pairwise(sizes)]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name, row in table.items():
        cells = [f"{s:.3g}" for s in row["seconds"]] + [f"{row['peak_mb'][-1]:,.0f}"]
        cells += [f"{k:.2f}" for k in row["exponents"]]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine() -> dict:
    """What the figures depend on."""
    import datetime
    import os
    import platform
    from importlib import metadata

    from retrieval_lab.machine import cpu

    ram_kb = next((int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal:")), 0)
    return {**cpu(), "usable_cores": len(os.sched_getaffinity(0)), "ram_gib": round(ram_kb / 2**20, 1),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"), "python": platform.python_version(),
            **{p: metadata.version(p) for p in ("numpy", "faiss-cpu", "pytrec-eval-terrier")},
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--faiss-docs", type=int, default=1_000_000, help="0: skip FAISS")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", default="/tmp/bench-scale")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--shape", choices=["default", "msmarco"], default="default",
                        help="msmarco: passages of MS MARCO's lengths, --queries 7000 at --depth 1000, ours "
                        "(streamed, saved, memory-mapped index) against bm25s at each size")
    parser.add_argument("--depth", type=int, default=MSMARCO_DEPTH, help="msmarco shape only")
    parser.add_argument("--reference-src", help="msmarco shape: a src/ folder of the code to compare runs with")
    parser.add_argument("--reference-max", type=int, default=100_000, help="largest size compared with it")
    parser.add_argument("--workers", type=int, default=1, help="msmarco shape: bm25.workers of the search step")
    parser.add_argument("--peer-max", type=int, help="msmarco shape: largest size bm25s also runs at (default: all)")
    parser.add_argument("--tantivy", nargs="*", default=[], choices=["en_stem", "stop"],
                        help="msmarco shape: tantivy analyzers to run as peers at each size (scripts/_tantivy.py)")
    parser.add_argument("--repeats", type=int, default=1, help="msmarco shape: rounds of ours and the tantivy peers, "
                        "alternating; each one's fastest is kept")
    parser.add_argument("--cpu", type=int, help="msmarco shape: the one CPU the processes of ours and the tantivy "
                        "peers run on, every thread of theirs (default: any)")
    args = parser.parse_args()
    RESULT.check(args)  # before any work: a bench may run for hours
    if args.shape == "msmarco":
        msmarco_main(args)
        return
    work_dir = Path(args.work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for n in args.sizes:
        results.append(run_size(n, args.queries, work_dir, args.seed))
    table = summarise(args.sizes, results)
    print(markdown(args.sizes, table))
    out = {"sizes": args.sizes, "queries": args.queries, "table": table, "results": results, "goals": GOALS,
           "machine": machine()}
    largest = results[-1]["steps"]
    out["bm25_seconds"] = largest["bm25_index"]["seconds"] + largest["bm25_search"]["seconds"]
    out["bm25_peak_mb"] = max(largest[s]["peak_mb"] for s in ("load", "bm25_index", "bm25_search"))
    out["metrics_ratio"] = [r["steps"]["metrics"]["seconds"] / r["steps"]["metrics_pytrec_eval"]["seconds"]
                            for r in results]
    out["max_exponent"] = max((k for name, row in table.items() if name != "metrics_pytrec_eval"
                               for k in row["exponents"]), default=None)
    print(f"\nBM25 index + search at {args.sizes[-1]:,} docs: {out['bm25_seconds']:.0f} s, "
          f"peak {out['bm25_peak_mb']:,.0f} MiB; metrics / pytrec_eval: "
          + ", ".join(f"{r:.2f}" for r in out["metrics_ratio"]) + f"; largest exponent {out['max_exponent']}")
    if args.faiss_docs:
        out["faiss"] = _bench.isolated(faiss_steps, args.faiss_docs, args.queries)
        for factory, row in out["faiss"]["rows"].items():
            print(f"FAISS {factory}: build {row['build_seconds']:.1f} s, {row['queries_per_second']:,.0f} q/s, "
                  f"recall@100 vs Flat {row['recall@100_vs_flat']:.3f}, peak {row['peak_mb']:,.0f} MiB")
    RESULT.write(args.json, out)


if __name__ == "__main__":
    main()
