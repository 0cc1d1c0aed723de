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

Two ways to run it, both :class:`ShardedBM25` (a retriever: ``search(queries, depth) -> Run``):
``retrieval-lab index`` with ``bm25.shards`` S > 1 cuts the corpus (:func:`cut_corpus`) and has each shard
indexed and saved by a task (:func:`write_sharded_index`: a folder of S index folders and ``shards.json``),
which ``retrieve --corpus`` loads, each shard memory-mapped by a task (:meth:`ShardedBM25.open`); ``retrieve
--dataset`` with S > 1 sends each shard's texts to a task that indexes them in memory
(:meth:`ShardedBM25.from_corpus`). The tasks run on the Dask cluster ``bm25.scheduler`` names, or a LocalCluster
(:mod:`retrieval_lab.core.cluster`), which retries a task whose worker died and refuses the run when it keeps dying.

The runs are the one index's, byte for byte, when the shards are the collection cut
into contiguous ranges in order (:func:`split_corpus`): a score is the sum, in the order
of the terms' first occurrence in the collection, of the same float64 impacts. That order
is the order of (first shard holding the term, its local id there), which step 2 reports.
The top-k merge keeps the single index's cut: trec_eval's order (score, then document id,
descending) is total, so a shard's top ``depth`` holds every one of its documents in the
global top ``depth``.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import hashlib
import json
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.atomic import atomic_path
from ..core.cluster import HeldShards, Progress
from ..core.data import corpus_file, iter_corpus, raw_lines
from ..core.errors import InputError
from ..core.params import BM25Params, Params, TokenizerParams
from ..runs import Run, ranked
from ..tokenizer import Tokenizer
from .base import top_k
from .bm25 import BM25Index, IndexStats, build_in, idf

Plan = list[tuple[str, float, int]]  # (token, global idf, repeats in the query), in global term order
MANIFEST = "shards.json"  # in a sharded index folder, beside its shard-NNNNN index folders
FORMAT = "retrieval-lab-bm25-shards/1"


@dataclass(frozen=True)
class ShardStats:
    documents: int
    total_length: int
    terms: dict[str, tuple[int, int]]  # query token -> (df in the shard, local term id); absent: df 0


@dataclass(frozen=True)
class ShardFile:
    """One contiguous part of a corpus file: its own file, whose line 1 is line ``first_line`` of the corpus."""
    path: Path
    first_line: int
    documents: int


def split_corpus(source: str | Path, shards: int, output: str | Path) -> list[Path]:
    """The shard files of :func:`cut_corpus` (their paths, in order)."""
    return [part.path for part in cut_corpus(source, shards, output)]


def cut_corpus(source: str | Path, shards: int, output: str | Path) -> list[ShardFile]:
    """Cut a BEIR corpus.jsonl (gzipped or not) into ``shards`` contiguous files of (nearly) equal document
    counts, in order: ``output/shard-00000.jsonl`` ... Lines are copied as they are (each shard checks its own
    file when it is indexed), a blank one with the document after it, so that a shard's line i is the corpus's
    line ``first_line + i - 1``: an error found in a shard names the corpus's line. One folder output, all files
    or none."""
    if shards < 1:
        raise InputError(f"shards must be positive, got {shards}", field="--shards")
    source = corpus_file(source) if Path(source).is_dir() else Path(source)
    count = sum(1 for _, line in raw_lines(source) if line.strip())
    sizes = [count // shards + (1 if s < count % shards else 0) for s in range(shards)]
    starts = [sum(sizes[:s]) for s in range(shards)]  # the index of each shard's first document
    firsts = [1] * shards
    with atomic_path(output, is_dir=True) as tmp, contextlib.ExitStack() as files:
        current, fh, documents = -1, None, 0
        for number, line in raw_lines(source):
            shard = min(bisect.bisect_right(starts, documents) - 1, shards - 1)  # the shard of the next document
            while current < shard:
                files.close()
                current += 1
                fh = files.enter_context(open(tmp / f"shard-{current:05d}.jsonl", "wb"))
                firsts[current] = number
            fh.write(line if line.endswith(b"\n") else line + b"\n")
            documents += bool(line.strip())
        files.close()
        for empty in range(current + 1, shards):  # more shards than documents
            (tmp / f"shard-{empty:05d}.jsonl").touch()
    return [ShardFile(Path(output) / f"shard-{s:05d}.jsonl", firsts[s], sizes[s]) for s in range(shards)]


# ----------------------------------------------------------------------------- tasks (run on the workers)


class Shard:
    """A shard's index held by a worker. Moved to another worker, it travels as the folder it was loaded from
    (read there again, memory-mapped) or, built in memory, as its arrays."""

    def __init__(self, index: BM25Index, folder: str | None = None):
        self.index, self.folder = index, folder

    def __reduce__(self):
        if self.folder is not None:
            return load_shard, (self.folder,)
        i = self.index
        return _from_arrays, (i.doc_ids, i.vocab, i.offsets, i.postings, i.df_array, i.lengths, i.tokenizer, i.fields)


def _from_arrays(*arrays) -> Shard:
    return Shard(BM25Index(*arrays))


def _index(shard: Shard | BM25Index) -> BM25Index:
    return shard.index if isinstance(shard, Shard) else shard


def load_shard(folder: str) -> Shard:
    """A saved shard index, memory-mapped (the task of ``retrieve --corpus`` on a sharded index)."""
    return Shard(BM25Index.load(folder), folder)


def build_memory_shard(items: list[tuple[str, str]], tokenizer: TokenizerParams, fields: list[str]) -> Shard:
    """A shard's index from its (id, text) pairs, sent with the task (``retrieve --dataset``)."""
    return Shard(BM25Index.build(items, tokenizer, fields))


def build_shard(path: str | Path, tokenizer: TokenizerParams, fields: list[str]) -> BM25Index:
    """One shard's index from its corpus file, read in one pass."""
    return BM25Index.build(((doc.id, doc.content(fields)) for doc in iter_corpus(path)), tokenizer, fields)


@contextlib.contextmanager
def _corpus_lines(shard: ShardFile, source: str) -> Iterator[None]:
    """An InputError at a line of the shard's file, told at the corpus's own line."""
    try:
        yield
    except InputError as exc:
        if exc.path is None or Path(exc.path) != Path(shard.path):
            raise
        line = None if exc.line is None else shard.first_line + exc.line - 1
        raise InputError(exc.reason, source, line, exc.field) from None


@dataclass(frozen=True)
class ShardReport:
    """What a shard's build task sends back (its index stays in its folder)."""
    shard: int
    documents: int
    terms: int
    postings: int
    total_length: int
    empty: tuple[str, ...]  # ids of the documents with no text in the fields, in order
    id_hashes: np.ndarray  # [n] uint64, 8 bytes of BLAKE2b of each id: duplicates across shards are found with these
    seconds: float


def _id_hashes(ids: Iterable[str]) -> np.ndarray:
    digest = hashlib.blake2b
    return np.frombuffer(b"".join(digest(i.encode("utf-8"), digest_size=8).digest() for i in ids) or b"",
                         dtype=np.uint64)


def build_saved_shard(shard: int, part: ShardFile, source: str, folder: str, scratch: str,
                      tokenizer: TokenizerParams, fields: list[str]) -> ShardReport:
    """Index shard ``shard``'s corpus file into ``folder`` (the task of ``index`` with bm25.shards > 1).

    Built in a folder of its own under ``scratch`` and renamed onto ``folder`` when whole: a task run again
    (its worker died) never finds nor leaves half an index there.
    """
    start = time.perf_counter()
    attempt = Path(scratch) / f"{Path(folder).name}-{uuid.uuid4().hex}"
    attempt.mkdir(parents=True)
    empty: list[str] = []

    def items():
        for doc in iter_corpus(part.path):
            text = doc.content(fields)
            if not text:
                empty.append(doc.id)
            yield doc.id, text

    try:
        (attempt / "index").mkdir()
        with _corpus_lines(part, source):
            index = build_in(attempt / "index", items(), tokenizer, fields)
        shutil.rmtree(folder, ignore_errors=True)
        (attempt / "index").rename(folder)
    finally:
        shutil.rmtree(attempt, ignore_errors=True)
    return ShardReport(shard, len(index.doc_ids), len(index.vocab), index.postings_count, index.stats.total_length,
                       tuple(empty), _id_hashes(index.doc_ids), time.perf_counter() - start)


def shard_stats(index: Shard | BM25Index, tokens: Iterable[str]) -> ShardStats:
    """Step 2 on one shard: its size and, for the query tokens it holds, their df and local id."""
    index = _index(index)
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


def search_shard(index: Shard | BM25Index, plans: dict[str, Plan], stats: IndexStats, params: BM25Params,
                 depth: int) -> Run:
    """Step 3 on one shard: each query's top ``depth`` of this shard, scored with the global statistics."""
    index = _index(index)
    norm = index.norms(stats, params)
    vocab, run = index.vocab, {}
    for qid, plan in plans.items():
        local = [(vocab[t], weight, r) for t, weight, r in plan if t in vocab]
        rows, values = index.top(local, norm, depth)  # the same bits as the exhaustive sum
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


def _ids(index: Shard | BM25Index) -> list[str]:
    return _index(index).doc_ids


# ----------------------------------------------------------------------------- the client's side


def sharded_search(client, shard_files: list[str | Path], queries: dict[str, str], tokenizer: TokenizerParams,
                   params: BM25Params, fields: list[str], depth: int) -> Run:
    """Build one index per shard file and search them all, as tasks of the Dask ``client``'s cluster.

    Each shard's index is built and kept on a worker (only statistics and top-k lists travel);
    the client tokenizes the queries, sums the statistics and merges.
    """
    indexes = [client.submit(build_shard, str(path), tokenizer, list(fields), pure=False) for path in shard_files]
    seen: dict[str, int] = {}
    for shard, index in enumerate(client.gather([client.submit(_ids, index, pure=False) for index in indexes])):
        for doc_id in index:
            if doc_id in seen:
                raise InputError(f"document id {doc_id!r} in shards {seen[doc_id]} and {shard}",
                                 str(shard_files[shard]), field="_id")
            seen[doc_id] = shard
    del seen
    return ShardedBM25(client, indexes, [], tokenizer, params).search(queries, depth)


class ShardedBM25(HeldShards):
    """BM25 over shard indexes held by the workers of a Dask cluster: the one index's run, byte for byte.

    :meth:`open` (a folder :func:`write_sharded_index` wrote) and :meth:`from_corpus` start or join the cluster
    ``bm25.scheduler`` names and hold it until :meth:`close`.
    """

    name = "bm25"
    needs = "dataset"

    def __init__(self, client, shards: list, doc_ids: list[str], tokenizer: TokenizerParams, params: BM25Params,
                 resources: contextlib.ExitStack | None = None, progress: Progress = None):
        self.client, self.shards, self.doc_ids, self.params = client, shards, doc_ids, params
        self._tokenize = Tokenizer(tokenizer).tokenize
        self._resources, self.progress = resources, progress
        # what step 2 told of the collection, kept: it does not change while the shards are held
        self._sizes: list[tuple[int, int]] | None = None  # per shard: documents, total length
        self._terms: dict[str, list[tuple[int, int] | None]] = {}  # token -> per shard (df, local id) or None

    @classmethod
    def open(cls, folder: str | Path, params: Params, progress: Progress = None) -> ShardedBM25:
        """The shards of a sharded index folder, each memory-mapped by a task and kept by its worker. Refused when
        built with other tokenizer params or fields than ``params`` give (k1 and b apply when it is searched)."""
        folder = Path(folder).resolve()
        manifest = read_manifest(folder)
        _same_tokens(manifest, params, folder / MANIFEST)
        doc_ids: list[str] = []
        for entry in manifest["shards"]:  # the qrels are checked against these (``load_dataset(doc_ids=)``)
            path = folder / entry["folder"] / "doc_ids.json"
            try:
                doc_ids += json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise InputError(f"unreadable list ({exc.__class__.__name__})", str(path)) from None
        if len(doc_ids) != manifest["documents"]:
            raise InputError(f"{len(doc_ids)} ids in its shards, expected {manifest['documents']}",
                             str(folder / MANIFEST), field="documents")
        return cls._start(params, [str(folder / e["folder"]) for e in manifest["shards"]], doc_ids, progress,
                          lambda client, k, path: client.submit(load_shard, path, key=_key("bm25-load", k)), "loaded")

    @staticmethod
    def is_index(folder: str | Path) -> bool:
        """Whether ``folder`` is a sharded index (``index`` with bm25.shards > 1 wrote it)."""
        return is_sharded(folder)

    @classmethod
    def from_index_folder(cls, folder: str | Path, params: Params, progress: Progress = None) -> ShardedBM25:
        return cls.open(folder, params, progress)

    @staticmethod
    def build_index_from(source: str | Path, folder: str | Path, params: Params,
                         progress: Progress = None) -> ShardedIndexReport:
        """``index`` with bm25.shards > 1: :func:`write_sharded_index`."""
        return write_sharded_index(source, folder, params, progress)

    @classmethod
    def from_inputs(cls, params: Params, dataset=None, embeddings=None, progress: Progress = None) -> ShardedBM25:
        """``retrieve --dataset`` with bm25.shards > 1: :meth:`from_corpus` of the dataset's corpus."""
        if dataset is None:
            raise InputError("bm25 reads a BEIR folder: give --dataset", field="--dataset")
        return cls.from_corpus(dataset.corpus, params, progress)

    @classmethod
    def from_corpus(cls, corpus: dict, params: Params, progress: Progress = None) -> ShardedBM25:
        """``bm25.shards`` contiguous parts of ``corpus`` ({id: Doc}, in collection order), each sent to a task
        that indexes it in memory."""
        from ..core.cluster import spans

        fields = list(params.retrieve.fields)
        docs = list(corpus.values())
        parts = [[(d.id, d.content(fields)) for d in docs[a:b]] for a, b in spans(len(docs), params.bm25.shards)]
        return cls._start(params, parts, [d.id for d in docs], progress,
                          lambda client, k, items: client.submit(build_memory_shard, items, params.tokenizer, fields,
                                                                 key=_key("bm25-build", k)), "indexed")

    @classmethod
    def _start(cls, params: Params, inputs: list, doc_ids: list[str], progress: Progress, submit, verb: str):
        from ..core import cluster

        resources = contextlib.ExitStack()
        try:
            client = resources.enter_context(cluster.client_for(params.bm25.scheduler, len(inputs),
                                                                "bm25.scheduler"))
            shards = [submit(client, k, item) for k, item in enumerate(inputs)]
            cluster.wait_each(shards, progress, verb)
        except BaseException:
            resources.close()
            raise
        return cls(client, shards, doc_ids, params.tokenizer, params.bm25, resources, progress)

    def search(self, queries: dict[str, str], depth: int) -> Run:
        """Each query's top ``depth``: statistics summed over the shards (those of tokens met before are kept: one
        round trip a query once they are known), every shard searched, lists merged."""
        from ..core import cluster

        client = self.client
        tokens = {qid: self._tokenize(text) for qid, text in queries.items()}
        distinct = sorted({t for ts in tokens.values() for t in ts})
        missing = [t for t in distinct if t not in self._terms]
        if missing or self._sizes is None:  # step 2 for the tokens no earlier search asked about
            reports = cluster.gather([client.submit(shard_stats, s, missing, key=_key("bm25-dfs", k))
                                      for k, s in enumerate(self.shards)])
            self._sizes = [(r.documents, r.total_length) for r in reports]
            for token in missing:
                self._terms[token] = [r.terms.get(token) for r in reports]
        stats = [ShardStats(n, length, {t: self._terms[t][k] for t in distinct if self._terms[t][k] is not None})
                 for k, (n, length) in enumerate(self._sizes)]
        total, plans = global_plans(stats, tokens)
        runs = cluster.gather([client.submit(search_shard, s, plans, total, self.params, depth,
                                             key=_key("bm25-search", k)) for k, s in enumerate(self.shards)],
                              self.progress, "searched")
        return merge(runs, depth)


def _key(what: str, shard: int) -> str:
    from ..core.cluster import task_key

    return task_key(what, shard)


# ----------------------------------------------------------------------------- a sharded index on disk


def read_manifest(folder: str | Path) -> dict:
    """A sharded index folder's ``shards.json``, checked."""
    path = Path(folder) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"not a sharded BM25 index ({exc.__class__.__name__})", str(path)) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InputError(f"expected format {FORMAT!r}", str(path), field="format")
    return manifest


def is_sharded(folder: str | Path) -> bool:
    return (Path(folder) / MANIFEST).is_file()


def _same_tokens(manifest: dict, params: Params, path: Path) -> None:
    tokenizer = dataclasses.asdict(params.tokenizer)
    if manifest.get("tokenizer") != tokenizer:
        raise InputError(f"built with tokenizer {manifest.get('tokenizer')}, params give {tokenizer}: build the "
                         "index again", str(path), field="tokenizer")
    if manifest.get("fields") != list(params.retrieve.fields):
        raise InputError(f"built over fields {manifest.get('fields')}, params give {list(params.retrieve.fields)}: "
                         "build the index again", str(path), field="fields")


@dataclass(frozen=True)
class ShardedIndexReport:
    shards: list[ShardReport]

    @property
    def documents(self) -> int:
        return sum(s.documents for s in self.shards)

    @property
    def postings(self) -> int:
        return sum(s.postings for s in self.shards)

    @property
    def empty(self) -> list[str]:
        return [i for s in self.shards for i in s.empty]


def write_sharded_index(source: str | Path, folder: str | Path, params: Params,
                        progress: Progress = None) -> ShardedIndexReport:
    """``bm25.shards`` shard indexes of the corpus file ``source`` into ``folder`` (an existing, empty one: the
    caller's atomic output), each built and saved by a task of the cluster ``bm25.scheduler`` names, and the
    manifest ``shards.json``. The shards' corpus files and unfinished builds sit beside ``folder`` (in its
    atomic output's box), which the workers must reach: on a real cluster, storage they share.
    """
    from ..core import cluster

    source, folder = Path(source).resolve(), Path(folder).resolve()
    shards = params.bm25.shards
    fields = list(params.retrieve.fields)
    scratch = Path(_scratch_beside(folder))
    try:
        parts = cut_corpus(source, shards, scratch / "corpus")
        with cluster.client_for(params.bm25.scheduler, shards, "bm25.scheduler") as client:
            futures = [client.submit(build_saved_shard, k, part, str(source), str(folder / f"shard-{k:05d}"),
                                     str(scratch / "builds"), params.tokenizer, fields, key=_key("bm25-index", k))
                       for k, part in enumerate(parts)]
            reports = cluster.gather(futures, progress, "indexed")
        _refuse_duplicates(reports, parts, folder, source)  # reads the shards' corpus files: before they go
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    manifest = {"format": FORMAT, "documents": sum(r.documents for r in reports),
                "postings": sum(r.postings for r in reports), "tokenizer": dataclasses.asdict(params.tokenizer),
                "fields": fields, "shards": [{"folder": f"shard-{r.shard:05d}", "documents": r.documents,
                                              "postings": r.postings, "first_line": p.first_line}
                                             for r, p in zip(reports, parts)]}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return ShardedIndexReport(reports)


def _scratch_beside(folder: Path) -> str:
    import tempfile

    return tempfile.mkdtemp(prefix=".bm25-shards-", dir=folder.parent)


def _refuse_duplicates(reports: list[ShardReport], parts: list[ShardFile], folder: Path, source: Path) -> None:
    """A document id in two shards is refused as one index refuses it: the corpus's line of its second occurrence.
    Each shard refused its own duplicates when it was built; across shards the ids' hashes are compared first."""
    hashes = [r.id_hashes for r in reports]
    every = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
    owner = np.repeat(np.arange(len(hashes)), [len(h) for h in hashes])
    order = np.argsort(every, kind="stable")  # stable: equal hashes keep collection order
    same = np.flatnonzero(every[order][1:] == every[order][:-1])
    ids: dict[int, list[str]] = {}
    for d in same:
        a, b = order[d], order[d + 1]
        if owner[a] == owner[b]:
            continue
        for s in (owner[a], owner[b]):
            if s not in ids:
                ids[s] = json.loads((folder / f"shard-{s:05d}" / "doc_ids.json").read_text(encoding="utf-8"))
        starts = np.concatenate([[0], np.cumsum([len(h) for h in hashes])])
        first, second = ids[owner[a]][a - starts[owner[a]]], ids[owner[b]][b - starts[owner[b]]]
        if first == second:  # not merely a hash collision
            raise InputError(f"duplicate document id {first!r} (first on line "
                             f"{_line(parts[owner[a]], a - starts[owner[a]])})", str(source),
                             _line(parts[owner[b]], b - starts[owner[b]]), "_id")


def _line(part: ShardFile, row: int) -> int:
    """The corpus's line of the ``row``-th document of a shard (blank lines skipped, as the reader skips them)."""
    seen = -1
    for number, line in raw_lines(part.path):
        seen += bool(line.strip())
        if seen == row:
            return part.first_line + number - 1
    raise AssertionError(f"{part.path} has no document {row}")
