"""BM25 over document shards with global statistics, the shards built and searched as Dask tasks.

Elasticsearch's "DFS query then fetch": a shard alone knows its own N, df and avgdl, and
scoring with those gives each shard other idfs than one index would. So, as there:

1. **build**: each shard indexes its own corpus file (:func:`build_shard`, a
   :class:`~retrieval_lab.retrievers.bm25.BM25Index` that stays in the worker's memory);
2. **dfs**: each shard reports its N, total length and, for every distinct query token,
   its df and local term id (:func:`shard_stats`); the client sums them: global N, avgdl
   and df, hence each token's idf (:func:`global_plans`);
3. **query**: each shard scores every query with the global idf and avgdl and keeps its
   top ``depth`` (:func:`search_shard`); the client merges the lists (:func:`merge`).

The runs are the one index's, byte for byte, when the shards are the collection cut
into contiguous ranges in order (:func:`split_corpus`): a score is the sum, in the order
of the terms' first occurrence in the collection, of the same float64 impacts. That order
is the order of (first shard holding the term, its local id there), which step 2 reports.
The top-k merge keeps the single index's cut: trec_eval's order (score, then document id,
descending) is total, so a shard's top ``depth`` holds every one of its documents in the
global top ``depth``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..core.atomic import atomic_path
from ..core.data import corpus_file, iter_corpus, raw_lines
from ..core.errors import InputError
from ..core.params import BM25Params, TokenizerParams
from ..runs import Run, ranked
from ..tokenizer import Tokenizer
from .base import top_k
from .bm25 import BM25Index, IndexStats, idf

Plan = list[tuple[str, float, int]]  # (token, global idf, repeats in the query), in global term order


@dataclass(frozen=True)
class ShardStats:
    documents: int
    total_length: int
    terms: dict[str, tuple[int, int]]  # query token -> (df in the shard, local term id); absent: df 0


def split_corpus(source: str | Path, shards: int, output: str | Path) -> list[Path]:
    """Cut a BEIR corpus.jsonl (gzipped or not) into ``shards`` contiguous files of (nearly) equal document
    counts, in order: ``output/shard-00000.jsonl`` ... Lines are copied as they are (each shard checks its own
    file when it is indexed); blank lines are left out. One folder output, all files or none."""
    if shards < 1:
        raise InputError(f"shards must be positive, got {shards}", field="--shards")
    source = corpus_file(source) if Path(source).is_dir() else Path(source)
    count = sum(1 for _, line in raw_lines(source) if line.strip())
    sizes = [count // shards + (1 if s < count % shards else 0) for s in range(shards)]
    paths = []
    with atomic_path(output, is_dir=True) as tmp:
        lines = (line for _, line in raw_lines(source) if line.strip())
        for s, size in enumerate(sizes):
            name = f"shard-{s:05d}.jsonl"
            with open(tmp / name, "wb") as fh:
                for _ in range(size):
                    line = next(lines)
                    fh.write(line if line.endswith(b"\n") else line + b"\n")
            paths.append(Path(output) / name)
    return paths


def build_shard(path: str | Path, tokenizer: TokenizerParams, fields: list[str]) -> BM25Index:
    """One shard's index from its corpus file, read in one pass."""
    return BM25Index.build(((doc.id, doc.content(fields)) for doc in iter_corpus(path)), tokenizer, fields)


def shard_stats(index: BM25Index, tokens: Iterable[str]) -> ShardStats:
    """Step 2 on one shard: its size and, for the query tokens it holds, their df and local id."""
    vocab = index.vocab
    terms = {t: (index.df(vocab[t]), vocab[t]) for t in tokens if t in vocab}
    return ShardStats(len(index.doc_ids), index.stats.total_length, terms)


def global_plans(stats: list[ShardStats], queries: dict[str, list[str]]) -> tuple[IndexStats, dict[str, Plan]]:
    """The collection's statistics and each query's plan from the shards' reports (in shard order)."""
    total = IndexStats(sum(s.documents for s in stats), sum(s.total_length for s in stats))
    df: dict[str, int] = {}
    order: dict[str, tuple[int, int]] = {}  # token -> (first shard holding it, its local id there)
    for shard, report in enumerate(stats):
        for token, (count, local) in report.terms.items():
            df[token] = df.get(token, 0) + count
            order.setdefault(token, (shard, local))
    plans = {}
    for qid, tokens in queries.items():
        counts: dict[str, int] = {}
        for token in tokens:
            if token in df:
                counts[token] = counts.get(token, 0) + 1
        plans[qid] = [(t, idf(total.documents, df[t]), r) for t, r in sorted(counts.items(), key=lambda i: order[i[0]])]
    return total, plans


def search_shard(index: BM25Index, plans: dict[str, Plan], stats: IndexStats, params: BM25Params,
                 depth: int) -> Run:
    """Step 3 on one shard: each query's top ``depth`` of this shard, scored with the global statistics."""
    norm = index.norms(stats, params)
    vocab, run = index.vocab, {}
    for qid, plan in plans.items():
        local = [(vocab[t], weight, r) for t, weight, r in plan if t in vocab]
        rows, values = index.top(local, norm, depth)  # pruned, the same bits as the exhaustive sum
        run[qid] = top_k(values, index.doc_ids, depth, positive_only=True, rows=rows)
    return run


def merge(runs: list[Run], depth: int) -> Run:
    """The shards' lists joined per query and cut at ``depth`` in trec_eval's order."""
    merged: Run = {}
    for qid in runs[0] if runs else []:
        found: dict[str, float] = {}
        for run in runs:
            found.update(run[qid])
        merged[qid] = dict(ranked(found)[:depth])
    return merged


def sharded_search(client, shard_files: list[str | Path], queries: dict[str, str], tokenizer: TokenizerParams,
                   params: BM25Params, fields: list[str], depth: int) -> Run:
    """Build one index per shard file and search them all, as tasks of the Dask ``client``'s cluster.

    Each shard's index is built and kept on a worker (only statistics and top-k lists travel);
    the client tokenizes the queries, sums the statistics and merges.
    """
    indexes = [client.submit(build_shard, str(path), tokenizer, list(fields), pure=False) for path in shard_files]
    tokenize = Tokenizer(tokenizer).tokenize
    tokens = {qid: tokenize(text) for qid, text in queries.items()}
    distinct = sorted({t for ts in tokens.values() for t in ts})
    stats = client.gather([client.submit(shard_stats, index, distinct, pure=False) for index in indexes])
    seen: dict[str, int] = {}
    for shard, index in enumerate(client.gather([client.submit(_ids, index, pure=False) for index in indexes])):
        for doc_id in index:
            if doc_id in seen:
                raise InputError(f"document id {doc_id!r} in shards {seen[doc_id]} and {shard}",
                                 str(shard_files[shard]), field="_id")
            seen[doc_id] = shard
    del seen
    total, plans = global_plans(stats, tokens)
    runs = client.gather([client.submit(search_shard, index, plans, total, params, depth, pure=False)
                          for index in indexes])
    return merge(runs, depth)


def _ids(index: BM25Index) -> list[str]:
    return index.doc_ids
