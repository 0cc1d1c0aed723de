"""BM25, Lucene variant, on bm25s with our tokenizer (params ``bm25:``, ``tokenizer:``)."""

from __future__ import annotations

from ..core.config import BM25Params, Params, TokenizerParams
from ..core.data import Doc
from ..core.errors import InputError
from ..runs import Run
from ..tokenizer import Tokenizer
from .base import top_k


class BM25Retriever:
    """Okapi BM25 as Lucene (and Anserini) score it, over the ``retrieve.fields`` of each document.

    score(q, d) = sum over query tokens t (repeats count) of
        idf(t) * tf(t, d) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl)),
        idf(t) = log(1 + (N - df(t) + 0.5) / (df(t) + 0.5)),
    with |d| the number of tokens of d after our tokenizer, avgdl their mean over the N
    documents. Documents scoring 0 (no query token) are not results.
    """

    name = "bm25"
    needs = "dataset"

    def __init__(self, corpus: dict[str, Doc], tokenizer: TokenizerParams, params: BM25Params,
                 fields: list[str]):
        import bm25s

        self._tokenize = Tokenizer(tokenizer).tokenize
        self.doc_ids = list(corpus)
        # Our tokens become ids here, so bm25s never tokenizes anything itself.
        self.vocab: dict[str, int] = {}
        ids = [[self.vocab.setdefault(t, len(self.vocab)) for t in self._tokenize(corpus[d].content(fields))]
               for d in self.doc_ids]
        self._model = None
        if self.vocab:
            # float64: scores match the formula to ~1e-12, not float32's ~1e-7
            self._model = bm25s.BM25(k1=params.k1, b=params.b, method="lucene", idf_method="lucene",
                                     dtype="float64")
            self._model.index((ids, self.vocab), create_empty_token=False, show_progress=False)

    @classmethod
    def from_inputs(cls, params: Params, dataset=None, embeddings=None) -> BM25Retriever:
        if dataset is None:
            raise InputError("bm25 reads a BEIR folder: give --dataset", field="--dataset")
        return cls(dataset.corpus, params.tokenizer, params.bm25, params.retrieve.fields)

    def search(self, queries: dict[str, str], depth: int) -> Run:
        run: Run = {}
        for qid, text in queries.items():
            ids = [self.vocab[t] for t in self._tokenize(text) if t in self.vocab]
            if not ids or self._model is None:
                run[qid] = {}
                continue
            scores = self._model.get_scores_from_ids(ids)  # [n_docs]
            run[qid] = top_k(scores, self.doc_ids, depth, positive_only=True)
        return run
