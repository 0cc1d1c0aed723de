"""Latent semantic analysis: TF-IDF (our tokenizer) reduced by truncated SVD (params ``lsa:``)."""

from __future__ import annotations

import numpy as np

from ..core.data import Doc
from ..core.errors import InputError
from ..core.params import LSAParams, Params, TokenizerParams
from ..runs import Run
from ..tokenizer import Tokenizer
from .base import top_k

_SCORES_BUDGET = 1 << 24  # query x document scores held at once (128 MiB of float64): no Q x N matrix


class LSARetriever:
    """Cosine similarity in a truncated-SVD space of TF-IDF vectors.

    X = TfidfVectorizer(tokenizer=ours) over the documents, X ~ U S V^T with
    dims = min(lsa.dims, n_features - 1, n_docs - 1) components; a text x maps to
    z = x V (sklearn's TruncatedSVD.transform); score(q, d) = z_q . z_d / (|z_q| |z_d|).
    Scores <= 0 are not results.
    """

    name = "lsa"
    needs = "dataset"

    def __init__(self, corpus: dict[str, Doc], tokenizer: TokenizerParams, params: LSAParams,
                 fields: list[str]):
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.doc_ids = list(corpus)
        # lowercase=False: case is the tokenizer's business
        self._vectorizer = TfidfVectorizer(tokenizer=Tokenizer(tokenizer).tokenize, lowercase=False,
                                           token_pattern=None)
        try:
            tfidf = self._vectorizer.fit_transform([corpus[d].content(fields) for d in self.doc_ids])  # [n, V]
        except ValueError:  # sklearn's "empty vocabulary": every document is empty or stopwords only
            raise InputError(f"none of the {len(self.doc_ids)} documents has a token to index",
                             field="retrieve.fields") from None
        # arpack needs dims < min(shape); randomized gives meaningless extra components beyond it
        self.dims = min(params.dims, tfidf.shape[1] - 1, tfidf.shape[0] - 1)
        if self.dims < 1:
            raise InputError(f"corpus too small for LSA ({tfidf.shape[0]} documents, {tfidf.shape[1]} terms)",
                             field="lsa.dims")
        self._svd = TruncatedSVD(n_components=self.dims, algorithm=params.algorithm,
                                 random_state=params.seed)
        self._docs = _unit_rows(self._svd.fit_transform(tfidf))  # [n, dims]

    @classmethod
    def from_inputs(cls, params: Params, dataset=None, embeddings=None) -> LSARetriever:
        if dataset is None:
            raise InputError("lsa reads a BEIR folder: give --dataset", field="--dataset")
        return cls(dataset.corpus, params.tokenizer, params.lsa, params.retrieve.fields)

    def search(self, queries: dict[str, str], depth: int) -> Run:
        qids = list(queries)
        run: Run = {}
        step = max(1, min(256, _SCORES_BUDGET // max(len(self.doc_ids), 1)))
        for start in range(0, len(qids), step):
            chunk = qids[start:start + step]
            reduced = self._svd.transform(self._vectorizer.transform([queries[q] for q in chunk]))
            scores = _unit_rows(reduced) @ self._docs.T  # [chunk, n]
            for row, qid in enumerate(chunk):
                run[qid] = top_k(scores[row], self.doc_ids, depth, positive_only=True)
        return run


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)  # [n, 1]
    return matrix / np.where(norms > 0, norms, 1.0)  # zero rows (no known term) stay zero
