import numpy as np
import pytest

from retrieval_lab.core.data import Doc
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import LSAParams, TokenizerParams
from retrieval_lab.retrievers.lsa import LSARetriever

PLAIN = TokenizerParams(stopwords=None, stemmer=None)
FIELDS = ["title", "text"]
TEXTS = {
    "d1": "heart disease and blood pressure",
    "d2": "blood pressure medication lowers pressure",
    "d3": "cancer cells divide quickly",
    "d4": "tumour cells and cancer therapy",
    "d5": "heart failure therapy",
}
CORPUS = {d: Doc(d, "", t) for d, t in TEXTS.items()}


def _reference(query: str, dims: int) -> np.ndarray:
    """TF-IDF from sklearn, then an exact SVD with numpy: z = x V_k, cosine."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(token_pattern=r"(?u)\b\w+\b")  # same tokens as PLAIN on this text
    x = vec.fit_transform(TEXTS.values()).toarray()  # [5, V]
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    v = vt[:dims].T  # [V, dims]
    docs, q = x @ v, vec.transform([query]).toarray() @ v  # [5, dims], [1, dims]
    return (docs @ q[0]) / (np.linalg.norm(docs, axis=1) * np.linalg.norm(q[0]))  # [5]


@pytest.mark.parametrize("algorithm", ["arpack", "randomized"])
def test_scores_match_an_exact_svd(algorithm):
    lsa = LSARetriever(CORPUS, PLAIN, LSAParams(dims=3, algorithm=algorithm, seed=0), FIELDS)
    got = lsa.search({"q": "blood pressure therapy"}, depth=10)["q"]
    expected = dict(zip(TEXTS, _reference("blood pressure therapy", 3)))
    assert set(got) == {d for d, s in expected.items() if s > 0}
    for doc_id, score in got.items():
        assert score == pytest.approx(expected[doc_id], abs=1e-6)


def test_dims_are_capped_and_unknown_words_give_no_result():
    lsa = LSARetriever(CORPUS, PLAIN, LSAParams(dims=128), FIELDS)
    assert lsa.dims == 4  # 5 documents - 1 (the vocabulary is larger)
    assert lsa.search({"q": "zebra"}, 10) == {"q": {}}


def test_same_seed_same_run():
    runs = [LSARetriever(CORPUS, PLAIN, LSAParams(dims=2, seed=3), FIELDS).search({"q": "cancer heart"}, 10)
            for _ in range(2)]
    assert runs[0] == runs[1]


def test_unknown_algorithm():
    with pytest.raises(InputError, match="arpack") as err:
        LSARetriever(CORPUS, PLAIN, LSAParams(algorithm="lanczos"), FIELDS)
    assert err.value.field == "lsa.algorithm"
