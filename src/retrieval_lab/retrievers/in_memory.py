"""BM25 and dense retrieval you index and search in memory: ``BM25().index(corpus).search(queries, k)``.

The same scorers the ``retrieve`` stage runs (:class:`.bm25.BM25Retriever`,
:class:`.dense.DenseRetriever`), without a folder on disk: a notebook, a test or another
program gets the run the command would write. Settings default to params.yaml's, so a run
made here is the pipeline's run on the same inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ..core.checks import check_texts, positive
from ..core.data import Doc, Query
from ..core.errors import InputError
from ..core.params import Params, base_model
from ..runs import Run


def _docs(corpus: Mapping[str, Doc | str]) -> dict[str, Doc]:
    """Documents from a corpus of :class:`Doc` or of plain texts (a text is the document's body); ids a TREC run
    carries and string texts, or an InputError naming the entry."""
    corpus = getattr(corpus, "corpus", corpus)  # a Dataset
    check_texts(corpus, "document", "corpus")
    return {did: d if isinstance(d, Doc) else Doc(did, "", str(d)) for did, d in corpus.items()}


def _texts(queries: Mapping[str, Query | str]) -> dict[str, str]:
    check_texts(queries, "query", "queries")
    return {qid: q.text if isinstance(q, Query) else str(q) for qid, q in queries.items()}


def _depth(k: int | None, params: Params) -> int:
    return params.retrieve.depth if k is None else positive(k, "k")


class BM25:
    """Okapi BM25 with Lucene's formula over the project's tokenizer (see :class:`.bm25.BM25Retriever`).

    ``k1``, ``b`` and ``fields`` override params' ``bm25`` and ``retrieve.fields``; a corpus of
    plain texts is indexed as document bodies.
    """

    def __init__(self, params: Params | None = None, *, k1: float | None = None, b: float | None = None,
                 fields: list[str] | None = None):
        params = params or Params()
        bm25 = replace(params.bm25, **{key: v for key, v in (("k1", k1), ("b", b)) if v is not None})
        retrieve = params.retrieve if fields is None else replace(params.retrieve, fields=list(fields))
        self.params = replace(params, bm25=bm25, retrieve=retrieve)
        self._retriever = None

    def index(self, corpus: Mapping[str, Doc | str]) -> BM25:
        from .bm25 import BM25Retriever

        p = self.params
        self._retriever = BM25Retriever(_docs(corpus), p.tokenizer, p.bm25, p.retrieve.fields)
        return self

    def search(self, queries: Mapping[str, Query | str], k: int | None = None) -> Run:
        """The top ``k`` (default ``retrieve.depth``) documents of each query; only documents sharing a
        token with the query are results, so a query may get fewer."""
        if self._retriever is None:
            raise InputError("index a corpus first: BM25().index(corpus).search(queries, k)")
        return self._retriever.search(_texts(queries), _depth(k, self.params))


class Dense:
    """Cosine of mean-pooled unit embeddings through an exact FAISS index (see :class:`.dense.DenseRetriever`).

    ``model`` names a model as params' ``dense.models`` do (default: the base model, ``train.base``);
    ``encoder`` reuses one already loaded (:func:`retrieval_lab.encoder.load`).
    """

    def __init__(self, model: str | None = None, params: Params | None = None, encoder=None):
        self.params = params or Params()
        self._model = model
        self._encoder = encoder
        self._retriever = None

    @property
    def encoder(self):
        """The encoder, loaded on first use: loading a model takes seconds, building this object should not."""
        if self._encoder is None:
            from .. import encoder as enc

            spec, where = (self._model, None) if self._model is not None else base_model(self.params)
            self._encoder = enc.load(spec, self.params.dense.device, where)
        return self._encoder

    def index(self, corpus: Mapping[str, Doc | str]) -> Dense:
        import numpy as np

        from ..encoder import Embeddings
        from .dense import DenseRetriever

        docs, p = _docs(corpus), self.params.dense
        fields = self.params.retrieve.fields
        matrix = self.encoder.encode([d.content(fields) for d in docs.values()], p.batch_size, p.max_seq_length,
                                     p.bf16, p.runtime)  # [N, H]
        embeddings = Embeddings(list(docs), matrix, [], np.zeros((0, matrix.shape[1]), np.float32))
        self._retriever = DenseRetriever(embeddings, p, self.encoder)
        return self

    def search(self, queries: Mapping[str, Query | str], k: int | None = None) -> Run:
        """The top ``k`` (default ``retrieve.depth``) documents of each query by cosine; every document is a
        candidate, so each query gets min(k, corpus size)."""
        if self._retriever is None:
            raise InputError("index a corpus first: Dense().index(corpus).search(queries, k)")
        return self._retriever.search(_texts(queries), _depth(k, self.params))
