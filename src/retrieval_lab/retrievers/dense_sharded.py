"""Dense retrieval over document shards held by the workers of a Dask cluster (``dense.shards`` > 1), on CPUs.

The document vectors are cut into ``dense.shards`` contiguous row ranges (at most: whole blocks of 1,024 vectors
each, below); each is read (memory-mapped from the embeddings folder, or sent with the task) and indexed with
``dense.faiss_factory`` by one task (searched with ``dense.faiss_search``, as one index is), and the index stays
on its worker. A query chunk is searched on every shard, each returning its top k (scores and global rows),
and the client keeps the k best of all (:func:`merge_top`).

With ``Flat`` (exact inner product) the merged top k is one Flat index's, rank for rank and bit for bit, when both
compute on one thread (a LocalCluster's workers have one; ``dask worker --nthreads 1``; OMP_NUM_THREADS=1 for the
one index): the shards are cut at multiples of FAISS's block of 1,024 vectors (:func:`aligned_spans`), so that a
shard's dot products are the very calls one index makes over the same rows (cut elsewhere, or on several threads,
FAISS splits the products otherwise and a score can move in its last bit: docs/scale.md). One exception: where the
cut at k falls among documents of equal score (duplicates), one index keeps those its heap met in an order of its
own, the merge those of the lowest rows: the same scores at every rank, perhaps other documents among the tied
ones at the cut (tests/retrievers/test_dense_sharded.py shows both). With an approximate factory (HNSW, IVF) each
shard has its own graph or lists, trained on its own vectors: recall against Flat is what
``scripts/bench_dense_sharded.py`` measures (docs/scale.md).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from ..core.cluster import HeldShards, Progress
from ..core.errors import InputError
from ..core.params import Params
from .dense import DenseRetriever, build_index, set_search


def aligned_spans(n: int, shards: int) -> list[tuple[int, int]]:
    """[start, end) of at most ``shards`` contiguous, non-empty parts of ``n`` rows, cut at multiples of FAISS's
    block of vectors (``distance_compute_blas_database_bs``, 1,024): whole blocks spread as evenly as they go, the
    last part ending at ``n``. Fewer parts than ``shards`` when ``n`` holds fewer blocks."""
    import faiss

    from ..core.cluster import spans

    block = int(faiss.cvar.distance_compute_blas_database_bs)
    blocks = -(-n // block)  # ceil
    return [(a * block, min(b * block, n)) for a, b in spans(blocks, shards) if b > a]


class DenseShard:
    """One shard's FAISS index on a worker, the global row of its first vector and its search setting
    (``dense.faiss_search``). Moved to another worker, it travels serialized by FAISS (never pickled as an object),
    and the setting is applied again there: FAISS's serialization keeps some (nprobe, efSearch), not all
    (an IVF's max_codes)."""

    def __init__(self, index, offset: int, search: str | None = None):
        self.index, self.offset, self.search = index, offset, search

    def __reduce__(self):
        import faiss

        return _deserialize, (faiss.serialize_index(_on_cpu(self.index)), self.offset, self.search)


def _on_cpu(index):
    import faiss

    return faiss.index_gpu_to_cpu(index) if hasattr(faiss, "index_gpu_to_cpu") and "Gpu" in type(index).__name__ \
        else index


def _deserialize(data: np.ndarray, offset: int, search: str | None = None) -> DenseShard:
    import faiss

    index = faiss.deserialize_index(data)
    set_search(index, search, "the shard's index")  # applied once already, on the index it was built as
    return DenseShard(index, offset, search)


def _threads() -> None:
    """FAISS's OpenMP threads: the worker's own (a LocalCluster worker has one), not every core of the machine."""
    import faiss

    from ..core.cluster import worker_threads

    faiss.omp_set_num_threads(worker_threads())


def load_shard(path: str, start: int, end: int, factory: str, seed: int, search: str | None = None) -> DenseShard:
    """Rows [start, end) of a document matrix (``doc_embeddings.npy``, memory-mapped), checked and indexed."""
    matrix = np.load(path, mmap_mode="r", allow_pickle=False)[start:end]
    return index_shard(np.ascontiguousarray(matrix, dtype=np.float32), start, factory, seed, search, path)


def index_shard(matrix: np.ndarray, start: int, factory: str, seed: int, search: str | None = None,
                source: str | None = None) -> DenseShard:
    """A shard's index over ``matrix`` (its rows are the documents ``start`` ... of the collection): built and
    searched as one index is (:func:`~retrieval_lab.retrievers.dense.build_index`, ``factory``, ``seed``,
    ``search``)."""
    bad = np.flatnonzero(~np.isfinite(matrix).all(axis=1))
    if bad.size:
        raise InputError(f"non-finite values in row {start + int(bad[0])} (document {start + int(bad[0]) + 1})",
                         source)
    _threads()
    return DenseShard(build_index(matrix, factory, seed, search), start, search)


def search_shard(shard: DenseShard, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """([q, k'] scores, [q, k'] global rows, -1 where nothing was found) of one shard, k' = min(k, its size)."""
    _threads()
    k = min(k, shard.index.ntotal)
    if k == 0:
        return np.zeros((len(queries), 0), np.float32), np.zeros((len(queries), 0), np.int64)
    scores, rows = shard.index.search(queries, k)
    return scores, np.where(rows >= 0, rows + shard.offset, -1)


def merge_top(parts: list[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of the shards' lists per query: score descending, then row ascending; entries without a
    row (-1) last."""
    scores = np.concatenate([p[0] for p in parts], axis=1)  # [q, sum k']
    rows = np.concatenate([p[1] for p in parts], axis=1)
    found = rows >= 0
    order = np.lexsort((np.where(found, rows, np.iinfo(np.int64).max),
                        np.where(found, -scores.astype(np.float64), np.inf)), axis=1)[:, :k]
    return np.take_along_axis(scores, order, axis=1), np.take_along_axis(rows, order, axis=1)


class ShardedDense(HeldShards, DenseRetriever):
    """:class:`DenseRetriever` whose document index is ``dense.shards`` FAISS indexes on the workers of a Dask
    cluster (``dense.scheduler``, or a LocalCluster): the same run with ``Flat``. Queries are encoded or looked up
    here, as one process does; only query vectors and top-k lists travel."""

    def __init__(self, embeddings, params: Params, client, shards: list, resources: contextlib.ExitStack,
                 encoder=None, progress: Progress = None):
        self.embeddings, self.params, self._encoder = embeddings, params.dense, encoder
        self._query_rows = {qid: i for i, qid in enumerate(embeddings.query_ids)}
        self.client, self.shards, self._resources, self.progress = client, shards, resources, progress

    @classmethod
    def from_inputs(cls, params: Params, dataset=None, embeddings=None, progress: Progress = None) -> ShardedDense:
        """``retrieve`` with dense.shards > 1: the vectors of an embeddings folder (:meth:`open`), or a BEIR folder
        encoded by the cluster's workers (:meth:`encode_and_open`)."""
        if embeddings is not None:
            return cls.open(embeddings, params, dataset, progress)
        if dataset is None:
            raise InputError("dense reads an embeddings folder (--embeddings) or a BEIR folder (--dataset)",
                             field="--embeddings")
        return cls.encode_and_open(dataset, params, progress)

    @classmethod
    def open(cls, folder: str | Path, params: Params, dataset=None, progress: Progress = None) -> ShardedDense:
        """The document vectors of an embeddings folder, each shard's rows read by its task (memory-mapped: the
        folder must be on storage the workers share)."""
        from .. import encoder as enc

        loaded = enc.load_embeddings(folder, documents_mapped=True)
        if dataset is not None and set(loaded.doc_ids) != set(dataset.corpus):
            raise InputError(f"its {len(loaded.doc_ids)} documents are not the {len(dataset.corpus)} of "
                             f"{dataset.path}", str(folder), field="--embeddings")
        path = str((Path(folder) / enc.DOC_EMBEDDINGS).resolve())
        dense = params.dense

        def submit(client, k, span):
            from ..core.cluster import task_key

            return client.submit(load_shard, path, *span, dense.faiss_factory, dense.seed, dense.faiss_search,
                                 key=task_key("dense-load", k))
        return cls._start(loaded, params, submit, progress, "loaded")

    @classmethod
    def encode_and_open(cls, dataset, params: Params, progress: Progress = None) -> ShardedDense:
        """A BEIR folder's texts encoded by the cluster's workers with the base model (``train.base`` under
        ``dense.models``: :class:`~retrieval_lab.encoder.ShardedEncoding`), the vectors gathered here, then
        each shard's rows sent with its task."""
        from .. import encoder as enc
        from ..core.params import base_model

        spec, where = base_model(params)
        model = enc.load(spec, params.dense.device, where)  # checked here first; the queries not encoded yet
        resources, client = cls._connect(params)
        try:
            vectors = enc.embed_dataset(model, dataset, params.dense, params.retrieve.fields,
                                        enc.ShardedEncoding(client, spec, where, params.dense.shards, progress))
        except BaseException:
            resources.close()
            raise
        return cls.from_embeddings(vectors, params, model, progress, (resources, client))

    @classmethod
    def from_embeddings(cls, embeddings, params: Params, encoder=None, progress: Progress = None,
                        connected=None) -> ShardedDense:
        """Document vectors held here, each shard's rows sent with its task."""
        dense = params.dense
        matrix = embeddings.doc_embeddings

        def submit(client, k, span):
            from ..core.cluster import task_key

            return client.submit(index_shard, matrix[span[0]:span[1]], span[0], dense.faiss_factory, dense.seed,
                                 dense.faiss_search, key=task_key("dense-index", k))
        sharded = cls._start(embeddings, params, submit, progress, "indexed", connected)
        sharded._encoder = encoder
        return sharded

    @staticmethod
    def _connect(params: Params) -> tuple[contextlib.ExitStack, object]:
        from ..core import cluster

        resources = contextlib.ExitStack()
        client = resources.enter_context(cluster.client_for(params.dense.scheduler, params.dense.shards,
                                                            "dense.scheduler"))
        return resources, client

    @classmethod
    def _start(cls, embeddings, params: Params, submit, progress: Progress, verb: str,
               connected=None) -> ShardedDense:
        from ..core import cluster

        resources, client = connected or cls._connect(params)
        try:
            shards = [submit(client, k, span)
                      for k, span in enumerate(aligned_spans(len(embeddings.doc_ids), params.dense.shards))]
            cluster.wait_each(shards, progress, verb)
        except BaseException:
            resources.close()
            raise
        return cls(embeddings, params, client, shards, resources, progress=progress)

    def _top(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        from ..core.cluster import gather, task_key

        parts = gather([self.client.submit(search_shard, shard, queries, k, key=task_key("dense-search", i))
                        for i, shard in enumerate(self.shards)], self.progress, "searched")
        return merge_top(parts, k)
