"""BM25, Lucene variant, over our tokenizer (params ``bm25:``, ``tokenizer:``): a term-major sparse index."""

from __future__ import annotations

import math

import numpy as np

from ..core.data import Doc
from ..core.errors import InputError
from ..core.params import BM25Params, Params, TokenizerParams
from ..runs import Run
from ..tokenizer import Tokenizer
from .base import top_k

_DENSE_SHARE = 8  # a query touching more than 1/8 of the corpus is scored into one dense vector
_CHUNK = 8192  # documents counted at once: bounds the temporary arrays of the index build


def _counts(ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(distinct term ids, their counts) of one query."""
    return np.unique(np.asarray(ids, dtype=np.int32), return_counts=True)


def _chunk_postings(tokenizer: Tokenizer, vocab: dict[str, int], memo: dict[str, int], texts: list[str],
                    first: int, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(document row, term id, term frequency) of every distinct term of ``texts`` (rows from ``first``).

    Each distinct raw token is stemmed and looked up once (``memo``: raw token -> term id, -1
    for a stopword); the pairs are counted for the whole chunk in one sort.
    """
    if len(memo) > 2_000_000:  # distinct raw tokens remembered before the memo starts afresh
        memo.clear()
    ids: list[int] = []
    counts = np.empty(len(texts), dtype=np.int64)
    for i, text in enumerate(texts):
        raw = tokenizer.split(text)
        for token in dict.fromkeys(raw):  # first-occurrence order: term ids (and sums) never follow str hashes
            if token in memo:
                continue
            final = tokenizer.finalise(token)
            memo[token] = vocab.setdefault(final, len(vocab)) if final else -1
        before = len(ids)
        ids += [memo[t] for t in raw]
        counts[i] = len(ids) - before
    term = np.array(ids, dtype=np.int64)  # [T] every raw token of the chunk
    row = np.repeat(np.arange(first, first + len(texts), dtype=np.int64), counts)  # [T]
    kept = term >= 0
    term, row = term[kept], row[kept]
    lengths[first:first + len(texts)] = np.bincount(row - first, minlength=len(texts))
    pairs, tf = np.unique((row << 32) | term, return_counts=True)  # sorted by row, then term
    return (pairs >> 32).astype(np.int32), (pairs & 0xFFFFFFFF).astype(np.int32), tf.astype(np.int32)


def _term_major(terms: np.ndarray, docs: np.ndarray, weights: np.ndarray, n_terms: int):
    """CSR by term: postings of term t are ``docs[indptr[t]:indptr[t + 1]]`` with ``weights`` alike."""
    order = np.argsort(terms, kind="stable")  # stable: each term's postings stay in document order
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(terms, minlength=n_terms), out=indptr[1:])
    return indptr, docs[order], weights[order]


class BM25Retriever:
    """Okapi BM25 as Lucene (and Anserini) score it, over the ``retrieve.fields`` of each document.

    score(q, d) = sum over query tokens t (repeats count) of
        idf(t) * tf(t, d) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl)),
        idf(t) = log(1 + (N - df(t) + 0.5) / (df(t) + 0.5)),
    with |d| the number of tokens of d after our tokenizer, avgdl their mean over the N
    documents. Documents scoring 0 (no query token) are not results.

    The index holds one float64 weight per (term, document) pair, term-major, built one
    document at a time (no token list of the whole corpus is kept). A query costs the
    length of its terms' postings, not the size of the corpus, unless its postings cover
    a large share of it.
    """

    name = "bm25"
    needs = "dataset"

    def __init__(self, corpus: dict[str, Doc], tokenizer: TokenizerParams, params: BM25Params,
                 fields: list[str]):
        tokenizer_ = Tokenizer(tokenizer)
        self._tokenize = tokenizer_.tokenize
        self.doc_ids = list(corpus)
        self.vocab: dict[str, int] = {}
        n = len(self.doc_ids)
        lengths = np.zeros(n, dtype=np.int64)  # [N] tokens per document after the tokenizer
        memo: dict[str, int] = {}
        parts = [_chunk_postings(tokenizer_, self.vocab, memo, [corpus[d].content(fields) for d in
                                                               self.doc_ids[start:start + _CHUNK]], start, lengths)
                 for start in range(0, n, _CHUNK)]
        docs = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int32)  # [P] (doc, term) pairs
        terms = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int32)  # [P]
        tf = np.concatenate([p[2] for p in parts]).astype(np.float64) if parts else np.zeros(0)  # [P]
        del parts
        df = np.bincount(terms, minlength=len(self.vocab)).astype(np.float64)  # [V]
        # math.log (the C library's), not np.log: NumPy picks a SIMD log by CPU (AVX-512 or not) and
        # the last bit would differ between machines; BM25 runs are promised byte-identical everywhere.
        idf = np.fromiter(map(math.log, (1.0 + (n - df + 0.5) / (df + 0.5)).tolist()), np.float64, len(df))  # [V]
        avgdl = lengths.mean() if n and lengths.sum() else 1.0
        norm = params.k1 * (1.0 - params.b + params.b * lengths / avgdl)  # [N]
        weights = idf[terms] * tf / (tf + norm[docs])  # [P] float64: scores match the formula to ~1e-12
        del tf, norm
        self._indptr, self._docs, self._weights = _term_major(terms, docs, weights, len(self.vocab))

    @classmethod
    def from_inputs(cls, params: Params, dataset=None, embeddings=None) -> BM25Retriever:
        if dataset is None:
            raise InputError("bm25 reads a BEIR folder: give --dataset", field="--dataset")
        return cls(dataset.corpus, params.tokenizer, params.bm25, params.retrieve.fields)

    def scores(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(document rows, BM25 scores) of every document sharing a token with ``text``."""
        ids = [self.vocab[t] for t in self._tokenize(text) if t in self.vocab]
        if not ids:
            return np.zeros(0, np.int64), np.zeros(0)
        unique, repeats = _counts(ids)
        spans = [(self._indptr[t], self._indptr[t + 1]) for t in unique.tolist()]
        rows = np.concatenate([self._docs[a:b] for a, b in spans])  # [P_q]
        weights = np.concatenate([self._weights[a:b] * r for (a, b), r in zip(spans, repeats.tolist())])
        if len(rows) * _DENSE_SHARE > len(self.doc_ids):
            dense = np.bincount(rows, weights, minlength=len(self.doc_ids))  # [N]
            found = np.flatnonzero(dense)
            return found, dense[found]
        found, inverse = np.unique(rows, return_inverse=True)
        return found, np.bincount(inverse, weights, minlength=len(found))

    def search(self, queries: dict[str, str], depth: int) -> Run:
        run: Run = {}
        doc_ids = self.doc_ids
        for qid, text in queries.items():
            rows, values = self.scores(text)
            run[qid] = top_k(values, doc_ids, depth, positive_only=True, rows=rows)
        return run
