"""BM25, Lucene variant, over our tokenizer (params ``bm25:``, ``tokenizer:``): a compact term-major index.

The index (:class:`BM25Index`) holds the collection's raw statistics only: per term its
postings (rows and term frequencies, varint-coded by ``_bm25_kernel.c``: 1.7 bytes a posting on MS MARCO-shaped
passages) and its df, per document its length.
The BM25 impact of a posting is computed when a query reads it, with the collection
statistics (N, df, avgdl) given to the scorer: the same index serves one machine
(its own statistics) and a shard of a larger collection (the global ones, summed over
the shards first: see ``bm25_sharded.py``). Built in one pass over any iterable of
(id, text) in chunks, merged into the final arrays; saved as ``.npy`` arrays read back
memory-mapped with ``allow_pickle=False`` and JSON lists (vocabulary, ids): nothing is unpickled.

A search keeps each query's top ``depth`` (:meth:`BM25Index.top`: the compiled loop of ``_bm25_kernel.c``, built
when the package is installed) and returns the scores an exhaustive sum gives, bit for bit; with
``bm25.workers`` > 1 forked processes share the memory-mapped index and split the queries.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import json
import math
import multiprocessing
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..core.params import BM25Params, Params, TokenizerParams
from ..core.parse import json_loads
from ..runs import Run
from ..tokenizer import Tokenizer
from . import _bm25_kernel
from .base import top_k

_DENSE_SHARE = 5  # NumPy path: a query reading more postings than 1/5 of the documents is summed into one dense vector
_MEMO_LIMIT = 2_000_000  # distinct pieces of text remembered by the build before its memo starts afresh
_GROUP = 8_192  # pieces of text held as strings at once by the build
_UNMET = np.iinfo(np.int32).min  # the code of a piece not met yet
CHUNK = 256  # documents tokenized and counted at once: bounds the temporary arrays of the build
SPILL_CHUNK = 16_384  # the same when chunks go to disk: fewer, larger files
FORMAT = "retrieval-lab-bm25-index/2"  # /1 held int32 rows and tf arrays (5 bytes a posting at least)
# each array's dtype: what _bm25_kernel reads (a file holding another is damaged, never cast)
_ARRAYS = {"offsets": np.int64, "postings": np.uint8, "df": np.uint32, "lengths": (np.uint8, np.uint16, np.uint32)}


def idf(n: int, df: int) -> float:
    """Lucene's idf, log(1 + (N - df + 0.5) / (df + 0.5)).

    math.log (the C library's), not np.log: NumPy picks a SIMD log by CPU (AVX-512 or not) and
    the last bit would differ between machines; BM25 runs are promised byte-identical everywhere.
    """
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class _Terms:
    """The vocabulary as the build meets it, and what each distinct piece of text (``Tokenizer.pieces``) adds.

    Term ids follow first occurrence in the collection (never str hashes), which fixes the order of every
    score's sum. ``memo`` gives each piece met its code: its term id, -1 when it holds no indexed token (a
    stopword, "±"), or -2 - k when it holds several (``several[k]``: "10–20", "patient’s"). A piece is
    normalised, split, filtered and stemmed once, however often it occurs.
    """

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        self.vocab: dict[str, int] = {}
        self.memo: dict[str, int] = {}
        self.several: list[list[int]] = []

    def learn(self, pieces: list[str]) -> None:
        """Give each piece not met before its code, in order of first occurrence (the term ids' order)."""
        memo, vocab = self.memo, self.vocab
        new = [p for p in dict.fromkeys(pieces) if p not in memo]
        if all(map(str.isascii, new)):  # the common case: each piece is one raw token
            for piece, final in zip(new, self.tokenizer.finalise_many(new)):
                memo[piece] = vocab.setdefault(final, len(vocab)) if final else -1
            return
        tokens_of = self.tokenizer.piece_tokens
        held = [[p] if p.isascii() else tokens_of(p) for p in new]
        finals = iter(self.tokenizer.finalise_many([t for tokens in held for t in tokens]))
        for piece, tokens in zip(new, held):
            if len(tokens) == 1:
                final = next(finals)
                memo[piece] = vocab.setdefault(final, len(vocab)) if final else -1
                continue
            ids = [vocab.setdefault(f, len(vocab)) for f in [next(finals) for _ in tokens] if f]
            if len(ids) > 1:
                self.several.append(ids)
            memo[piece] = ids[0] if len(ids) == 1 else -1 if not ids else -1 - len(self.several)

    def codes(self, pieces: list[str]) -> np.ndarray:
        """[P] each piece's code, those not met before learnt (one dict lookup a piece: the build's main cost)."""
        codes = np.fromiter(map(self.memo.get, pieces, itertools.repeat(_UNMET)), dtype=np.int32, count=len(pieces))
        unmet = np.flatnonzero(codes == _UNMET).tolist()
        if unmet:
            unmet_pieces = [pieces[i] for i in unmet]
            self.learn(unmet_pieces)
            codes[unmet] = list(map(self.memo.__getitem__, unmet_pieces))
        return codes

    def spell_out(self, codes: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(codes, rows) with each piece of several tokens spelt out: its first term in place, the others
        appended (the order of a chunk's tokens matters no more once their terms are known)."""
        multi = np.flatnonzero(codes <= -2)
        if not multi.size:
            return codes, rows
        held = [self.several[-2 - c] for c in codes[multi].tolist()]
        codes[multi] = [ids[0] for ids in held]
        more = [t for ids in held for t in ids[1:]]
        return (np.concatenate([codes, np.array(more, dtype=codes.dtype)]),
                np.concatenate([rows, np.repeat(rows[multi], [len(ids) - 1 for ids in held])]))

    def postings(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(term id, chunk row, term frequency) of every distinct (term, document) of ``texts``, sorted by term
        then row, and the documents' lengths.

        The pieces are looked up in groups of about ``_GROUP`` (their strings weigh ~50 bytes each).
        """
        if len(self.memo) > _MEMO_LIMIT:  # distinct pieces remembered before the memo starts afresh (between
            self.memo.clear()  # chunks: the codes of a chunk are spelt out at its end)
            self.several.clear()
        pieces_of = self.tokenizer.pieces
        counts = np.empty(len(texts), dtype=np.int64)  # [n] pieces per document
        parts, group = [], []
        for i, text in enumerate(texts):
            pieces = pieces_of(text)
            counts[i] = len(pieces)
            group += pieces
            if len(group) >= _GROUP:
                parts.append(self.codes(group))
                group = []
        parts.append(self.codes(group))
        codes = np.concatenate(parts) if len(parts) > 1 else parts[0]  # [P]
        n = len(texts)
        codes, rows = self.spell_out(codes, np.repeat(np.arange(n, dtype=np.int32), counts))  # [T] int32
        # term-major keys, int32 where they fit (half the memory, sorted in 0.6x the time); a piece without
        # a term (-1) gives a negative key, dropped
        keys = codes.astype(np.int32 if len(self.vocab) * n <= np.iinfo(np.int32).max else np.int64) * n + rows
        keys, tf = np.unique(keys[keys >= 0], return_counts=True)  # sorted by term, then row
        rows = (keys % n).astype(np.int32)
        lengths = np.bincount(rows, weights=tf, minlength=n).astype(np.int64)  # exact: integers far below 2**53
        return (keys // n).astype(np.int32), rows, tf.astype(np.uint32), lengths


def _impacts(weight, repeats, tf: np.ndarray, norm: np.ndarray) -> np.ndarray:
    """[P] idf * tf / (tf + norm) * repeats in float64, in that order of operations: the bits of every run.

    ``weight`` and ``repeats`` a number or one per posting; ``norm`` the postings' own (a fresh gather, written
    over): in place, two arrays instead of five (a sum and a product commute exactly; * 1 changes nothing).
    """
    impacts = tf.astype(np.float64)
    norm += impacts  # tf + norm
    impacts *= weight  # idf * tf
    impacts /= norm
    if np.any(np.asarray(repeats) != 1):
        impacts *= repeats
    return impacts


class Vocabulary(Mapping[str, int]):
    """Term -> term id of a built index, held as the terms' UTF-8 bytes in one buffer sorted by bytes, looked up by
    bisection: 12 bytes a term beside its text, where the list and dict of str it replaces took 33 MiB at 200k
    terms (lab notes, 2026-12-06). Iterates in term-id order; :attr:`terms` is that list."""

    def __init__(self, terms: list[str]):
        encoded = [t.encode("utf-8") for t in terms]
        order = sorted(range(len(encoded)), key=encoded.__getitem__)
        self._blob = b"".join(encoded[i] for i in order)
        self._bounds = np.zeros(len(order) + 1, np.int64)  # [V + 1] where each sorted key starts in the buffer
        np.cumsum(np.fromiter((len(encoded[i]) for i in order), np.int64, count=len(order)), out=self._bounds[1:])
        self._ids = np.array(order, dtype=np.int32)  # [V] the term id at each sorted place
        if any(encoded[a] == encoded[b] for a, b in itertools.pairwise(order)):  # equal terms sort side by side
            raise ValueError("a vocabulary holds each term once")

    def __len__(self) -> int:
        return len(self._ids)

    def _key(self, place: int) -> bytes:
        return self._blob[int(self._bounds[place]):int(self._bounds[place + 1])]

    def get(self, term: str, default=None):
        try:
            key = term.encode("utf-8")
        except (AttributeError, UnicodeEncodeError):  # not a str, or one no term can equal (a lone surrogate)
            return default
        place = bisect.bisect_left(range(len(self._ids)), key, key=self._key)  # the sorted places, by their bytes
        return int(self._ids[place]) if place < len(self._ids) and self._key(place) == key else default

    def __contains__(self, term) -> bool:
        return self.get(term) is not None

    def __getitem__(self, term: str) -> int:
        found = self.get(term)
        if found is None:
            raise KeyError(term)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self.terms)

    @property
    def terms(self) -> list[str]:
        """Every term in term-id order (built on demand: a list of str is what this class spares)."""
        out: list[str] = [""] * len(self._ids)
        for place, term_id in enumerate(self._ids.tolist()):
            out[term_id] = self._key(place).decode("utf-8")
        return out


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
    """Postings of a collection, term-major: term t's are the bytes ``postings[offsets[t]:offsets[t + 1]]``, ``df[t]``
    (row, tf) pairs in collection order (:meth:`postings_of` decodes them); ``lengths[row]`` the tokens of each
    document after the tokenizer."""

    def __init__(self, doc_ids: list[str], vocab: list[str], offsets: np.ndarray, postings: np.ndarray,
                 df: np.ndarray, lengths: np.ndarray, tokenizer: TokenizerParams, fields: list[str]):
        self.doc_ids = doc_ids
        self.vocab = vocab if isinstance(vocab, Vocabulary) else Vocabulary(vocab)
        self.offsets, self.postings, self.df_array, self.lengths = offsets, postings, df, lengths
        # plain views of the (maybe memory-mapped) arrays for the search: slicing an np.memmap runs Python code
        self._offsets, self._postings, self._df = np.asarray(offsets), np.asarray(postings), np.asarray(df)
        # the distinct lengths and each document's place among them: a search reads a norm per distinct length
        # (a few hundred floats) through 1-byte codes instead of one float64 per document (8 MiB at 1M passages)
        self._distinct_lengths, codes = np.unique(np.asarray(lengths), return_inverse=True)
        self._length_codes = codes.astype(_narrowest(len(self._distinct_lengths) - 1))
        self.tokenizer, self.fields = tokenizer, list(fields)
        self._local = threading.local()  # each thread's scratch arrays for :meth:`top`

    # ------------------------------------------------------------------------- build

    @classmethod
    def build(cls, items: Iterable[tuple[str, str]], tokenizer: TokenizerParams, fields: list[str],
              chunk: int = CHUNK, spill: Path | None = None) -> BM25Index:
        """One pass over (document id, indexed text); the text of at most ``chunk`` documents is held at once.

        Each chunk's postings (term-major, 10 bytes each) wait in memory, or in ``spill`` (a folder)
        when given, until the vocabulary is complete; then each is placed at its terms' offsets
        of the final arrays, in collection order, and dropped.
        """
        terms_met = _Terms(Tokenizer(tokenizer))
        doc_ids: list[str] = []
        lengths: list[np.ndarray] = []
        parts: list = []  # per chunk: (terms, rows, tf) arrays or the .npy paths holding them
        first = 0
        for batch in _batches(items, chunk):
            doc_ids += [d for d, _ in batch]
            terms, rows, tf, length = terms_met.postings([t for _, t in batch])
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
        all_lengths = all_lengths.astype(_narrowest(int(all_lengths.max(initial=0))))
        return cls(doc_ids, list(terms_met.vocab), *_encode(*_merge(parts, len(terms_met.vocab))), all_lengths,
                   tokenizer, fields)

    @classmethod
    def from_corpus(cls, corpus, tokenizer: TokenizerParams, fields: list[str], chunk: int = CHUNK) -> BM25Index:
        """From a ``{id: Doc}`` mapping (or any iterable of Doc)."""
        docs = corpus.values() if isinstance(corpus, dict) else corpus
        return cls.build(((doc.id, doc.content(fields)) for doc in docs), tokenizer, fields, chunk)

    # ------------------------------------------------------------------------- statistics and scoring

    @property
    def stats(self) -> IndexStats:
        return IndexStats(len(self.doc_ids), int(self.lengths.sum(dtype=np.int64)))

    @property
    def terms(self) -> list[str]:
        """The vocabulary in term-id order (a new list)."""
        return self.vocab.terms

    @property
    def postings_count(self) -> int:
        """Every (term, document) pair of the collection."""
        return int(self._df.sum(dtype=np.int64))

    def df(self, term: int) -> int:
        return int(self._df[term])

    def postings_of(self, terms: list[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows int32, tf uint32) of each term's postings, one term after the other, rows rising within each."""
        terms = np.asarray(terms, dtype=np.int64)
        if len(terms) and (terms.min() < 0 or terms.max() >= len(self.vocab)):
            raise IndexError(f"terms outside 0..{len(self.vocab) - 1}")
        total = int(self._df[terms].sum(dtype=np.int64))
        rows, tf = np.empty(total, np.int32), np.empty(total, np.uint32)
        _bm25_kernel.decode(self._offsets, self._postings, self._df, terms, rows, tf)
        return rows, tf

    def norms(self, stats: IndexStats, params: BM25Params) -> np.ndarray:
        """k1 * (1 - b + b * |d| / avgdl) of each distinct length |d| of the documents, with the collection's avgdl
        (this index's or the global one); a document's is ``norms[length code]`` (:meth:`document_norms`)."""
        return params.k1 * (1.0 - params.b + params.b * self._distinct_lengths.astype(np.float64) / stats.avgdl)

    def document_norms(self, norm: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The norm of each document of ``rows``, from :meth:`norms`."""
        return norm[self._length_codes[rows]]

    def scores(self, plan: list[tuple[int, float, int]], norm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) of every document holding a term of ``plan``: (term id, idf, repeats), in the
        order the sums run (the global first-occurrence order of the terms).

        A posting's impact is idf * tf / (tf + norm[d]) times the query repeats, in float64 and in
        that order of operations: the bits of the weights the index once stored.
        """
        if not plan:
            return np.zeros(0, np.int64), np.zeros(0)
        terms, idfs, repeats = zip(*plan)
        rows, tf = self.postings_of(terms)  # every term's postings at once, in plan order
        if len(plan) == 1:
            weights = _impacts(idfs[0], repeats[0], tf, self.document_norms(norm, rows))
        else:  # each posting's impact with the operations (and so the bits) of _impacts
            lengths = self._df[np.array(terms)]
            weights = _impacts(np.array(idfs).repeat(lengths), np.array(repeats, np.float64).repeat(lengths),
                               tf, self.document_norms(norm, rows))
        n = len(self.doc_ids)
        if len(rows) * _DENSE_SHARE > n:
            dense = np.bincount(rows, weights, minlength=n)  # [N]
            found = (dense != 0).nonzero()[0]  # np.flatnonzero(dense), 4x faster on floats
            return found, dense[found]
        found, inverse = np.unique(rows, return_inverse=True)
        return found, np.bincount(inverse, weights, minlength=len(found))

    def top(self, plan: list[tuple[int, float, int]], norm: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) holding every document whose score reaches the ``depth``-th best (ties too), each
        with the bits :meth:`scores` gives it; other documents may come along (``top_k`` cuts them).

        The compiled loop of ``_bm25_kernel`` (its impacts must be positive, as BM25's idf keeps them); with a weight
        not above 0, :meth:`scores`.
        """
        if not plan or depth < 1 or any(not weight > 0 for _, weight, _ in plan):
            return self.scores(plan, norm)
        scratch = self._scratch(depth)
        terms, idfs, repeats = zip(*plan)
        terms, idfs, repeats = (np.array(terms, np.int64), np.array(idfs, np.float64), np.array(repeats, np.float64))
        try:
            while (found := _bm25_kernel.top_rows(self._offsets, self._postings, self._df, norm, self._length_codes,
                                                  self._length_codes.itemsize, terms, idfs, repeats, depth,
                                                  *scratch)) < 0:
                room = min(2 * len(scratch[1]), len(self.doc_ids))  # more ties than room; never more than N
                scratch = self._local.scratch = (scratch[0], np.empty(room, np.int32), np.empty(room))
        except BaseException:
            self._local.scratch = None  # maybe left part-written: the next query starts from fresh zeros
            raise
        return scratch[1][:found].copy(), scratch[2][:found].copy()

    def _scratch(self, depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This thread's (sums [N], all zero between queries; candidate rows and values, room for 4 x depth
        but never more than the N documents there are, which always fit)."""
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = (np.zeros(len(self.doc_ids)), np.empty(0, np.int32), np.empty(0))
        room = min(4 * depth, len(self.doc_ids))
        if len(scratch[1]) < room:
            scratch = (scratch[0], np.empty(room, np.int32), np.empty(room))
        self._local.scratch = scratch
        return scratch

    # ------------------------------------------------------------------------- files

    def save(self, folder: str | Path) -> None:
        """Into ``folder`` (an existing, empty one: the caller's atomic output)."""
        folder = Path(folder)
        for name, array in zip(_ARRAYS, (self.offsets, self.postings, self.df_array, self.lengths)):
            np.save(folder / f"{name}.npy", array, allow_pickle=False)
        meta = {"format": FORMAT, "documents": len(self.doc_ids), "terms": len(self.vocab),
                "postings": self.postings_count, "bytes": len(self.postings),
                "tokenizer": dataclasses.asdict(self.tokenizer),
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
            meta = json_loads(meta_path.read_text(encoding="utf-8"), str(meta_path))
        except InputError:
            raise
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
                lists[name] = json_loads(path.read_text(encoding="utf-8"), str(path))
            except InputError:
                raise
            except (OSError, ValueError) as exc:
                raise InputError(f"unreadable list ({exc.__class__.__name__})", str(path)) from None
        n, v = len(lists["doc_ids"]), len(lists["vocab"])
        shapes = {"offsets": v + 1, "lengths": n, "df": v, "postings": meta.get("bytes")}
        for name, size in shapes.items():
            if arrays[name].ndim != 1 or arrays[name].shape[0] != size:
                raise InputError(f"{arrays[name].shape[0]} entries, expected {size}", str(folder / f"{name}.npy"))
        if n != meta.get("documents"):
            raise InputError(f"{n} ids, index.json says {meta.get('documents')}", str(folder / "doc_ids.json"))
        _check_values(folder, arrays, n)
        return cls(lists["doc_ids"], lists["vocab"], arrays["offsets"], arrays["postings"], arrays["df"],
                   arrays["lengths"], TokenizerParams(**meta["tokenizer"]), meta["fields"])


def _check_values(folder: Path, arrays: dict[str, np.ndarray], documents: int) -> None:
    """Every array of the dtype the kernel reads, and the postings decoding to what the offsets and df say: a
    damaged file (bytes changed in place) is one line naming it, never an error in the middle of a search. One
    pass over the postings through a mapping of its own, unmapped after: the search maps only the pages of the
    terms it reads."""
    for name, values in arrays.items():
        allowed = [np.dtype(t) for t in np.atleast_1d(_ARRAYS[name])]
        if values.dtype not in allowed:
            raise InputError(f"holds {values.dtype}, expected {' or '.join(map(str, allowed))}: the file is damaged; "
                             "build the index again", str(folder / f"{name}.npy"))
    postings = arrays["postings"]
    if isinstance(postings, np.memmap):
        postings = np.load(folder / "postings.npy", mmap_mode="r", allow_pickle=False)
    problem = _bm25_kernel.check(np.asarray(arrays["offsets"]), np.asarray(postings), np.asarray(arrays["df"]),
                                 documents)
    del postings  # its own mapping: unmapped here
    if problem is not None:
        array, what = problem
        raise InputError(f"{what}: the file is damaged; build the index again", str(folder / f"{array}.npy"))


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


def _narrowest(largest: int) -> type:
    """The narrowest unsigned dtype holding 0..largest (lengths, length codes, term frequencies: all below 2**32,
    as a document's tokens are counted in uint32)."""
    return next(t for t in (np.uint8, np.uint16, np.uint32) if largest <= np.iinfo(t).max)


def _encode(indptr: np.ndarray, docs: np.ndarray, tf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSR postings as the index holds them: (byte offsets [V + 1], varint postings, df [V])."""
    offsets = np.empty(len(indptr), np.int64)
    postings = np.frombuffer(_bm25_kernel.encode(indptr, docs, tf, tf.itemsize, offsets), np.uint8)
    return offsets, postings, np.diff(indptr).astype(np.uint32)


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
    # the narrowest that holds every term frequency (uint8 in passages and abstracts): a quarter of uint32's memory
    # in the build; the kernel's encode reads 1, 2 or 4-byte frequencies
    tf_out = np.empty(total, dtype=_narrowest(max_tf))
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

    def ranked(self, text: str, depth: int) -> dict[str, float]:
        """The top ``depth`` documents of one query (pruned: :meth:`BM25Index.top`), in trec_eval order."""
        plan = query_plan(self.index, self._tokenize(text), self.stats)
        rows, values = self.index.top(plan, self._norm, depth)
        return top_k(values, self.doc_ids, depth, positive_only=True, rows=rows)

    def search(self, queries: dict[str, str], depth: int) -> Run:
        """Each query's top ``depth``; ``bm25.workers`` forked processes split the queries where the platform
        forks (Linux, macOS), one process elsewhere: the same run either way."""
        workers = min(self.params.workers, len(queries))
        if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            return _search_forked(self, queries, depth, workers)
        return {qid: self.ranked(text, depth) for qid, text in queries.items()}


_FORKED: BM25Retriever | None = None  # the retriever forked workers inherit (memory-mapped arrays shared)


def _search_chunk(task: tuple[list[tuple[str, str]], int]) -> list[dict[str, float]]:
    items, depth = task
    return [_FORKED.ranked(text, depth) for _, text in items]


def _search_forked(retriever: BM25Retriever, queries: dict[str, str], depth: int, workers: int) -> Run:
    """The queries in chunks over ``workers`` forked processes; the run assembled in the queries' order.

    A worker that dies (killed, out of memory) fails the run with one line: the pool notices the dead
    process and stops, where ``multiprocessing.Pool`` would wait for its lost chunk for ever.
    """
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    global _FORKED
    items = list(queries.items())
    size = max(1, min(64, len(items) // (workers * 8)))  # small chunks: a slow query delays no worker long
    chunks = [items[i:i + size] for i in range(0, len(items), size)]
    _FORKED = retriever
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            results = list(pool.map(_search_chunk, [(chunk, depth) for chunk in chunks]))
    except BrokenProcessPool:
        raise ChildProcessError(f"bm25.workers: one of the {workers} search processes died before its queries were "
                                "done (killed, or out of memory); no run written") from None
    finally:
        _FORKED = None
    return {qid: docs for chunk, ranked in zip(chunks, results) for (qid, _), docs in zip(chunk, ranked)}


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
