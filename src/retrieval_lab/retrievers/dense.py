"""Dense retrieval: inner product of unit embeddings (cosine) through a FAISS index (params ``dense:``)."""

from __future__ import annotations

import re

import numpy as np

from ..core import fingerprint
from ..core.errors import InputError
from ..core.params import DenseParams, Params, base_model
from ..runs import Run, ranked

_QUERY_CHUNK = 1024  # queries searched at once: bounds the [chunk, depth] result arrays


def build_index(matrix: np.ndarray, factory: str = "Flat", seed: int = 0, search: str | None = None):
    """A FAISS inner-product index over ``matrix`` [n, H] (float32, unit rows).

    "Flat" is exact search (IndexFlatIP). Other factory strings ("IVF256,Flat",
    "HNSW32", ...) are approximate; an index that needs training (IVF k-means) is
    trained on the documents with ``seed``. On a GPU build with CUDA the index is
    moved to GPU 0. ``search`` (``dense.faiss_search``: "efSearch=256", "nprobe=64")
    sets the index's search-time parameters once its vectors are in (:func:`set_search`);
    None or "": FAISS's defaults.
    """
    import faiss

    dim = matrix.shape[1]
    try:
        index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as exc:
        raise InputError(f"invalid FAISS factory string {factory!r}: {str(exc).splitlines()[0]}",
                         field="dense.faiss_factory") from None
    if not index.is_trained:
        ivf = faiss.try_extract_index_ivf(index)
        if ivf is not None:
            ivf.cp.seed = seed  # k-means initialisation
        try:
            index.train(matrix)
        except RuntimeError as exc:  # e.g. IVF1024 on 4 documents: k-means needs a point per centroid
            reason = str(exc).split("failed: ")[-1].splitlines()[0]
            raise InputError(f"{factory!r} cannot be trained on the {len(matrix)} documents: {reason}",
                             field="dense.faiss_factory") from None
    if hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:
        resources = faiss.StandardGpuResources()
        index = faiss.index_cpu_to_gpu(resources, 0, index)
        index.resources = resources  # the GPU index must not outlive its resources
    index.add(matrix)
    set_search(index, search, factory)
    return index


def set_search(index, search: str | None, factory: str) -> None:
    """``search`` ("name=value[,name=value]") applied to ``index`` by FAISS's ParameterSpace (GpuParameterSpace for
    a GPU index). After the vectors are added: a setting such as an IVF's quantizer_efSearch would change how
    they are assigned. A name the index lacks ("nprobe" on Flat or HNSW) is an InputError naming
    ``dense.faiss_search``: FAISS raises a RuntimeError, having set the names before it."""
    if not search:
        return
    import faiss

    on_gpu = "Gpu" in type(index).__name__ and hasattr(faiss, "GpuParameterSpace")
    space = faiss.GpuParameterSpace() if on_gpu else faiss.ParameterSpace()
    try:
        space.set_index_parameters(index, search)
    except RuntimeError as exc:  # "... set_index_parameter:could not set parameter nprobe"
        reason = re.split(r"failed: |set_index_parameter:", str(exc).splitlines()[0])[-1].strip()
        raise InputError(f"search setting {search!r} does not apply to {factory!r}: {reason}",
                         field="dense.faiss_search") from None


class DenseRetriever:
    """score(q, d) = e_q . e_d with unit mean-pooled embeddings, i.e. their cosine.

    Built from an embeddings folder (queries already encoded there are looked up by
    id) or from a BEIR folder, encoded on the fly with the base model (``train.base`` under
    ``dense.models``).
    Every document is a result (cosines may be negative); the top ``depth`` are kept.
    """

    name = "dense"
    needs = "embeddings"

    def __init__(self, embeddings, params: DenseParams, encoder=None):
        self.embeddings, self.params, self._encoder = embeddings, params, encoder
        self._query_rows = {qid: i for i, qid in enumerate(embeddings.query_ids)}
        self._index = build_index(embeddings.doc_embeddings, params.faiss_factory, params.seed,
                                  params.faiss_search)

    @classmethod
    def from_inputs(cls, params: Params, dataset=None, embeddings=None) -> DenseRetriever:
        from .. import encoder as enc

        if embeddings is not None:
            loaded = enc.load_embeddings(embeddings)
            if dataset is not None and set(loaded.doc_ids) != set(dataset.corpus):
                raise InputError(f"its {len(loaded.doc_ids)} documents are not the {len(dataset.corpus)} of "
                                 f"{dataset.path}", str(embeddings), field="--embeddings")
            if dataset is not None:  # the same ids may name other texts: the corpus it was encoded from, checked
                fingerprint.check(loaded.report.get("corpus"), dataset.path, str(embeddings), "--embeddings",
                                  fingerprint.ENCODE_AGAIN)
            return cls(loaded, params.dense)
        if dataset is None:
            raise InputError("dense reads an embeddings folder (--embeddings) or a BEIR folder (--dataset)",
                             field="--embeddings")
        spec, where = base_model(params)
        model = enc.load(spec, params.dense.device, where)
        return cls(enc.embed_dataset(model, dataset, params.dense, params.retrieve.fields), params.dense, model)

    def _top(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """([q, k] scores, [q, k] rows, -1 where an approximate index found fewer) of a chunk of queries."""
        return self._index.search(queries, k)

    def _encoder_for_new_queries(self):
        if self._encoder is None:
            from .. import encoder as enc

            source = self.embeddings.report.get("model", {})
            spec = source.get("lock") or source.get("model_dir")
            if spec is None and "hub" in source:
                spec = f"hub:{source['hub']}@{source['revision']}"
            if spec is None:
                raise InputError("queries missing from the embeddings folder and its report names no model",
                                 field="--embeddings")
            self._encoder = enc.load(spec, self.params.device)
        return self._encoder

    def _query_matrix(self, qids: list[str], queries: dict[str, str]) -> np.ndarray:
        new = [q for q in qids if q not in self._query_rows]
        encoded = {}
        if new:
            vectors = self._encoder_for_new_queries().encode(
                [queries[q] for q in new], self.params.batch_size, self.params.max_seq_length, self.params.bf16,
                # named only when not torch: an encoder of the user's own takes the four arguments it always took
                **({"runtime": self.params.runtime} if self.params.runtime != "torch" else {}))
            encoded = dict(zip(new, vectors))
        stored = self.embeddings.query_embeddings
        return np.stack([encoded[q] if q in encoded else stored[self._query_rows[q]] for q in qids])  # [q, H]

    def search(self, queries: dict[str, str], depth: int) -> Run:
        doc_ids = self.embeddings.doc_ids
        k = min(depth, len(doc_ids))
        qids = list(queries)
        run: Run = {}
        for start in range(0, len(qids), _QUERY_CHUNK):
            chunk = qids[start:start + _QUERY_CHUNK]
            if k == 0:
                run.update({q: {} for q in chunk})
                continue
            scores, rows = self._top(self._query_matrix(chunk, queries), k)  # [c, k] each
            for qid, row_scores, row_ids in zip(chunk, scores, rows):
                # -1: an approximate index found fewer than k documents
                found = {doc_ids[j]: float(s) for s, j in zip(row_scores, row_ids) if j >= 0}
                run[qid] = dict(ranked(found))
        return run
