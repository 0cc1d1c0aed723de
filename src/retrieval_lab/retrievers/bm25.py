"""BM25, Lucene variant, over our tokenizer (params ``bm25:``, ``tokenizer:``): a compact term-major index.

The index (:class:`BM25Index`) holds the collection's raw statistics only: per term its
postings (document row int32, term frequency uint16 or uint32), per document its length.
The BM25 impact of a posting is computed when a query reads it, with the collection
statistics (N, df, avgdl) given to the scorer: the same index serves one machine
(its own statistics) and a shard of a larger collection (the global ones, summed over
the shards first: see ``bm25_sharded.py``). Built in one pass over any iterable of
(id, text) in chunks, merged into the final arrays; saved as ``.npy`` arrays read back
memory-mapped with ``allow_pickle=False`` and JSON lists (vocabulary, ids): nothing is unpickled.
"""

from __future__ import annotations

import array
import dataclasses
import json
import math
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..core.params import BM25Params, Params, TokenizerParams
from ..runs import Run
from ..tokenizer import Tokenizer
from .base import top_k

_DENSE_SHARE = 8  # a query touching more than 1/8 of the corpus is scored into one dense vector
CHUNK = 1024  # documents tokenized and counted at once: bounds the temporary arrays of the build
SPILL_CHUNK = 16_384  # the same when chunks go to disk: fewer, larger files
FORMAT = "retrieval-lab-bm25-index/1"
_ARRAYS = ("indptr", "docs", "tf", "lengths")


def idf(n: int, df: int) -> float:
    """Lucene's idf, log(1 + (N - df + 0.5) / (df + 0.5)).

    math.log (the C library's), not np.log: NumPy picks a SIMD log by CPU (AVX-512 or not) and
    the last bit would differ between machines; BM25 runs are promised byte-identical everywhere.
    """
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def _chunk_postings(tokenizer: Tokenizer, vocab: dict[str, int], memo: dict[str, int],
                    texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(term id, chunk row, term frequency) of every distinct (term, document) of ``texts``, sorted by
    term then row, and the documents' lengths.

    Each distinct raw token is stemmed and looked up once (``memo``: raw token -> term id, -1 for
    a stopword). Term ids follow first occurrence in the collection (never str hashes), which fixes
    the order of every score's sum.
    """
    if len(memo) > 2_000_000:  # distinct raw tokens remembered before the memo starts afresh
        memo.clear()
    split, finalise = tokenizer.split, tokenizer.finalise_many
    ids = array.array("q")  # term id of every raw token of the chunk (-1: stopword)
    counts = np.empty(len(texts), dtype=np.int64)  # [n] raw tokens per document
    for i, text in enumerate(texts):
        tokens = split(text)  # one document's strings at a time: a chunk's would weigh ~50 bytes a token
        new = set(tokens).difference(memo)
        if new:
            new = sorted(new, key=tokens.index)  # first-occurrence order
            for token, final in zip(new, finalise(new)):
                memo[token] = vocab.setdefault(final, len(vocab)) if final else -1
        ids.extend(map(memo.__getitem__, tokens))
        counts[i] = len(tokens)
    term = np.frombuffer(ids, dtype=np.int64) if ids else np.zeros(0, np.int64)  # [T]
    row = np.repeat(np.arange(len(texts), dtype=np.int64), counts)  # [T]
    kept = term >= 0
    term, row = term[kept], row[kept]
    lengths = np.bincount(row, minlength=len(texts))
    keys, tf = np.unique(term * len(texts) + row, return_counts=True)  # sorted by term, then row
    return ((keys // len(texts)).astype(np.int32), (keys % len(texts)).astype(np.int32),
            tf.astype(np.uint32), lengths)


@dataclass(frozen=True)
class IndexStats:
    """What the scorer needs of the whole collection: N, total length (avgdl = total / N)."""

    documents: int
    total_length: int

    @property
    def avgdl(self) -> float:
        # np.mean of the integer lengths, as ever: an exact sum (< 2**53) divided once
        return self.total_length / self.documents if self.documents and self.total_length else 1.0


class BM25Index:
    """Postings of a collection, term-major CSR: term t's are ``docs[indptr[t]:indptr[t + 1]]`` (rows in
    collection order) with ``tf`` alike; ``lengths[row]`` the tokens of each document after the tokenizer."""

    def __init__(self, doc_ids: list[str], vocab: list[str], indptr: np.ndarray, docs: np.ndarray, tf: np.ndarray,
                 lengths: np.ndarray, tokenizer: TokenizerParams, fields: list[str]):
        self.doc_ids, self.terms = doc_ids, vocab
        self.vocab = {t: i for i, t in enumerate(vocab)}
        self.indptr, self.docs, self.tf, self.lengths = indptr, docs, tf, lengths
        self.tokenizer, self.fields = tokenizer, list(fields)

    # ------------------------------------------------------------------------- build

    @classmethod
    def build(cls, items: Iterable[tuple[str, str]], tokenizer: TokenizerParams, fields: list[str],
              chunk: int = CHUNK, spill: Path | None = None) -> BM25Index:
        """One pass over (document id, indexed text); the text of at most ``chunk`` documents is held at once.

        Each chunk's postings (term-major, 10 bytes each) wait in memory, or in ``spill`` (a folder)
        when given, until the vocabulary is complete; then each is placed at its terms' offsets
        of the final arrays, in collection order, and dropped.
        """
        tok = Tokenizer(tokenizer)
        vocab: dict[str, int] = {}
        memo: dict[str, int] = {}
        doc_ids: list[str] = []
        lengths: list[np.ndarray] = []
        parts: list = []  # per chunk: (terms, rows, tf) arrays or the .npy paths holding them
        first = 0
        for batch in _batches(items, chunk):
            doc_ids += [d for d, _ in batch]
            terms, rows, tf, length = _chunk_postings(tok, vocab, memo, [t for _, t in batch])
            lengths.append(length.astype(np.uint32))
            rows += first
            first += len(batch)
            if spill is not None:
                paths = tuple(spill / f"chunk{len(parts)}-{name}.npy" for name in ("terms", "rows", "tf"))
                for path, array in zip(paths, (terms, rows, tf)):
                    np.save(path, array, allow_pickle=False)
                parts.append(paths)
            else:
                parts.append((terms, rows, tf))
        all_lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.uint32)
        indptr, docs, tf = _merge(parts, len(vocab))
        return cls(doc_ids, list(vocab), indptr, docs, tf, all_lengths, tokenizer, fields)

    @classmethod
    def from_corpus(cls, corpus, tokenizer: TokenizerParams, fields: list[str], chunk: int = CHUNK) -> BM25Index:
        """From a ``{id: Doc}`` mapping (or any iterable of Doc)."""
        docs = corpus.values() if isinstance(corpus, dict) else corpus
        return cls.build(((doc.id, doc.content(fields)) for doc in docs), tokenizer, fields, chunk)

    # ------------------------------------------------------------------------- statistics and scoring

    @property
    def stats(self) -> IndexStats:
        return IndexStats(len(self.doc_ids), int(self.lengths.sum(dtype=np.int64)))

    def df(self, term: int) -> int:
        return int(self.indptr[term + 1] - self.indptr[term])

    def norms(self, stats: IndexStats, params: BM25Params) -> np.ndarray:
        """[N] k1 * (1 - b + b * |d| / avgdl), with the collection's avgdl (this index's or the global one)."""
        return params.k1 * (1.0 - params.b + params.b * self.lengths.astype(np.float64) / stats.avgdl)

    def scores(self, plan: list[tuple[int, float, int]], norm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) of every document holding a term of ``plan``: (term id, idf, repeats), in the
        order the sums run (the global first-occurrence order of the terms).

        A posting's impact is idf * tf / (tf + norm[d]) times the query repeats, in float64 and in
        that order of operations: the bits of the weights the index once stored.
        """
        if not plan:
            return np.zeros(0, np.int64), np.zeros(0)
        indptr, docs, tfs = self.indptr, self.docs, self.tf
        row_parts, weight_parts = [], []
        for term, weight, repeats in plan:
            a, b = int(indptr[term]), int(indptr[term + 1])
            rows = docs[a:b]
            tf = tfs[a:b].astype(np.float64)
            row_parts.append(rows)
            weight_parts.append(weight * tf / (tf + norm[rows]) * repeats)
        rows = np.concatenate(row_parts) if len(row_parts) > 1 else row_parts[0]  # [P_q]
        weights = np.concatenate(weight_parts) if len(weight_parts) > 1 else weight_parts[0]
        n = len(self.doc_ids)
        if len(rows) * _DENSE_SHARE > n:
            dense = np.bincount(rows, weights, minlength=n)  # [N]
            found = np.flatnonzero(dense)
            return found, dense[found]
        found, inverse = np.unique(rows, return_inverse=True)
        return found, np.bincount(inverse, weights, minlength=len(found))

    # ------------------------------------------------------------------------- files

    def save(self, folder: str | Path) -> None:
        """Into ``folder`` (an existing, empty one: the caller's atomic output)."""
        folder = Path(folder)
        for name in _ARRAYS:
            np.save(folder / f"{name}.npy", getattr(self, name), allow_pickle=False)
        meta = {"format": FORMAT, "documents": len(self.doc_ids), "terms": len(self.terms),
                "postings": len(self.docs), "tokenizer": dataclasses.asdict(self.tokenizer),
                "fields": self.fields}
        (folder / "index.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        (folder / "vocab.json").write_text(json.dumps(self.terms, ensure_ascii=False), encoding="utf-8")
        (folder / "doc_ids.json").write_text(json.dumps(self.doc_ids, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, folder: str | Path, mmap: bool = True) -> BM25Index:
        """Read a saved index: arrays memory-mapped (``mmap``), never unpickled; a wrong or partial folder is
        an InputError naming the file."""
        folder = Path(folder)
        meta_path = folder / "index.json"
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"not a BM25 index folder ({exc.__class__.__name__})", str(meta_path)) from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise InputError(f"expected format {FORMAT!r}", str(meta_path), field="format")
        arrays = {}
        for name in _ARRAYS:
            path = folder / f"{name}.npy"
            try:
                arrays[name] = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise InputError(f"unreadable array ({exc})", str(path)) from None
        lists = {}
        for name in ("vocab", "doc_ids"):
            path = folder / f"{name}.json"
            try:
                lists[name] = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise InputError(f"unreadable list ({exc.__class__.__name__})", str(path)) from None
        n, v = len(lists["doc_ids"]), len(lists["vocab"])
        shapes = {"indptr": v + 1, "lengths": n, "docs": meta.get("postings"), "tf": meta.get("postings")}
        for name, size in shapes.items():
            if arrays[name].ndim != 1 or arrays[name].shape[0] != size:
                raise InputError(f"{arrays[name].shape[0]} entries, expected {size}", str(folder / f"{name}.npy"))
        if n != meta.get("documents"):
            raise InputError(f"{n} ids, index.json says {meta.get('documents')}", str(folder / "doc_ids.json"))
        return cls(lists["doc_ids"], lists["vocab"], arrays["indptr"], arrays["docs"], arrays["tf"],
                   arrays["lengths"], TokenizerParams(**meta["tokenizer"]), meta["fields"])


def _batches(items: Iterable[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    batch: list[tuple[str, str]] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _runs(terms: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of a term-sorted array: each run's term, its length, and each entry's rank within its run."""
    starts = np.flatnonzero(np.diff(terms, prepend=-1))  # [u] where each term's run begins
    lengths = np.diff(starts, append=len(terms))  # [u]
    return terms[starts], lengths, np.arange(len(terms)) - np.repeat(starts, lengths)


def _merge(parts: list, n_terms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The chunks' term-major postings placed into one CSR: term t's postings in chunk order (= row order).

    Work per chunk is its own postings (never the vocabulary size), so many small chunks cost no more.
    """
    def arrays(part):
        return tuple(np.load(p, allow_pickle=False) for p in part) if isinstance(part[0], Path) else part

    counts = np.zeros(n_terms, dtype=np.int64)  # [V] postings per term (its df)
    max_tf = 0
    for part in parts:
        terms, _, tf = arrays(part)
        unique, lengths, _ = _runs(terms)
        counts[unique] += lengths
        max_tf = max(max_tf, int(tf.max()) if len(tf) else 0)
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    del counts
    total = int(indptr[-1])
    docs = np.empty(total, dtype=np.int32)
    tf_out = np.empty(total, dtype=np.uint16 if max_tf <= np.iinfo(np.uint16).max else np.uint32)
    cursor = indptr[:-1].copy()  # [V] where each term's next posting goes
    for i in range(len(parts)):
        terms, rows, tf = arrays(parts[i])
        parts[i] = None  # dropped once placed
        unique, lengths, rank = _runs(terms)
        positions = cursor[terms] + rank
        docs[positions] = rows
        tf_out[positions] = tf
        cursor[unique] += lengths
    return indptr, docs, tf_out


def query_plan(index: BM25Index, tokens: list[str], stats: IndexStats) -> list[tuple[int, float, int]]:
    """(term id, idf, repeats) of the query tokens the index knows, in term-id order."""
    vocab = index.vocab
    counts: dict[int, int] = {}
    for token in tokens:
        term = vocab.get(token)
        if term is not None:
            counts[term] = counts.get(term, 0) + 1
    return [(t, idf(stats.documents, index.df(t)), r) for t, r in sorted(counts.items())]


def corpus_items(corpus, fields: list[str]) -> Iterator[tuple[str, str]]:
    for doc in corpus.values() if isinstance(corpus, dict) else corpus:
        yield doc.id, doc.content(fields)


class BM25Retriever:
    """Okapi BM25 as Lucene (and Anserini) score it, over the ``retrieve.fields`` of each document.

    score(q, d) = sum over query tokens t (repeats count) of
        idf(t) * tf(t, d) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl)),
        idf(t) = log(1 + (N - df(t) + 0.5) / (df(t) + 0.5)),
    with |d| the number of tokens of d after our tokenizer, avgdl their mean over the N
    documents. Documents scoring 0 (no query token) are not results.

    A query costs the length of its terms' postings, not the size of the corpus, unless
    its postings cover a large share of it.
    """

    name = "bm25"
    needs = "dataset"

    def __init__(self, corpus, tokenizer: TokenizerParams, params: BM25Params, fields: list[str],
                 index: BM25Index | None = None):
        self.index = index if index is not None else BM25Index.from_corpus(corpus, tokenizer, fields)
        self._tokenize = Tokenizer(self.index.tokenizer).tokenize
        self.params = params
        self.stats = self.index.stats
        self._norm = self.index.norms(self.stats, params)  # [N]
        self.doc_ids = self.index.doc_ids

    @classmethod
    def from_index(cls, index: BM25Index, params: BM25Params) -> BM25Retriever:
        return cls(None, index.tokenizer, params, index.fields, index=index)

    @classmethod
    def from_index_folder(cls, folder: str | Path, params: Params) -> BM25Retriever:
        """A saved index (memory-mapped), refused when it was built with other tokenizer params or fields: it would
        give another run (k1 and b apply at search time: any value serves)."""
        index = BM25Index.load(folder)
        meta = str(Path(folder) / "index.json")
        if index.tokenizer != params.tokenizer:
            raise InputError(f"built with tokenizer {dataclasses.asdict(index.tokenizer)}, params give "
                             f"{dataclasses.asdict(params.tokenizer)}: build the index again", meta, field="tokenizer")
        if index.fields != list(params.retrieve.fields):
            raise InputError(f"built over fields {index.fields}, params give {list(params.retrieve.fields)}: build "
                             "the index again", meta, field="fields")
        return cls.from_index(index, params.bm25)

    @staticmethod
    def build_index(items: Iterable[tuple[str, str]], folder: Path, params: Params) -> BM25Index:
        """Index (id, text) pairs read once into ``folder`` (an empty one)."""
        return build_in(folder, items, params.tokenizer, params.retrieve.fields)

    @classmethod
    def from_inputs(cls, params: Params, dataset=None, embeddings=None) -> BM25Retriever:
        if dataset is None:
            raise InputError("bm25 reads a BEIR folder: give --dataset", field="--dataset")
        return cls(dataset.corpus, params.tokenizer, params.bm25, params.retrieve.fields)

    def scores(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(document rows, BM25 scores) of every document sharing a token with ``text``."""
        return self.index.scores(query_plan(self.index, self._tokenize(text), self.stats), self._norm)

    def search(self, queries: dict[str, str], depth: int) -> Run:
        run: Run = {}
        doc_ids = self.doc_ids
        for qid, text in queries.items():
            rows, values = self.scores(text)
            run[qid] = top_k(values, doc_ids, depth, positive_only=True, rows=rows)
        return run


def build_in(folder: Path, items: Iterable[tuple[str, str]], tokenizer: TokenizerParams, fields: list[str],
             chunk: int = SPILL_CHUNK) -> BM25Index:
    """Build with the chunks spilled to a scratch folder beside ``folder`` and save into ``folder``."""
    scratch = Path(tempfile.mkdtemp(prefix=".bm25-chunks-", dir=folder.parent))
    try:
        index = BM25Index.build(items, tokenizer, fields, chunk, spill=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    index.save(folder)
    return index
