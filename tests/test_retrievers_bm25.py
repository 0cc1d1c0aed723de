import math

import pytest

from retrieval_lab.core.config import BM25Params, TokenizerParams
from retrieval_lab.core.data import Doc, load_dataset
from retrieval_lab.metrics import measure_run
from retrieval_lab.retrievers.bm25 import BM25Retriever
from retrieval_lab.tokenizer import Tokenizer

PLAIN = TokenizerParams(stopwords=None, stemmer=None)
FIELDS = ["title", "text"]


def _corpus(texts: dict[str, str]) -> dict[str, Doc]:
    return {d: Doc(d, "", t) for d, t in texts.items()}


def test_scores_by_hand():
    bm25 = BM25Retriever(_corpus({"d1": "cat sat", "d2": "cat cat dog", "d3": "bird"}), PLAIN, BM25Params(), FIELDS)
    run = bm25.search({"q": "cat"}, depth=10)
    # N = 3, df(cat) = 2, avgdl = (2 + 3 + 1) / 3 = 2
    # idf = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln(1.6) = 0.4700036292
    # d1: tf 1, |d| 2: 1 / (1 + 1.2 * (0.25 + 0.75 * 2/2)) = 1 / 2.2  -> 0.2136380133
    # d2: tf 2, |d| 3: 2 / (2 + 1.2 * (0.25 + 0.75 * 3/2)) = 2 / 3.65 -> 0.2575362352
    # d3 has no "cat": score 0, not a result
    assert list(run["q"]) == ["d2", "d1"]
    assert run["q"]["d2"] == pytest.approx(0.2575362352, abs=1e-9)
    assert run["q"]["d1"] == pytest.approx(0.2136380133, abs=1e-9)


def _reference_bm25(docs: list[list[str]], query: list[str], k1: float, b: float) -> list[float]:
    n = len(docs)
    avgdl = sum(map(len, docs)) / n
    scores = []
    for doc in docs:
        score = 0.0
        for term in query:
            tf = doc.count(term)
            if tf:
                df = sum(term in d for d in docs)
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * tf / (tf + k1 * (1 - b + b * len(doc) / avgdl))
        scores.append(score)
    return scores


def test_matches_the_formula_with_title_stopwords_stemming_and_repeated_query_terms():
    corpus = {
        "a": Doc("a", "Cells", "The cells divide; dividing cells grow."),
        "b": Doc("b", "", "Tumour growth in mice and the role of cells."),
        "c": Doc("c", "Mice", "Mice were fed a diet."),
        "d": Doc("d", "", "Unrelated text about the weather."),
    }
    params, tok = BM25Params(k1=0.9, b=0.4), TokenizerParams()
    bm25 = BM25Retriever(corpus, tok, params, FIELDS)
    tokenize = Tokenizer(tok).tokenize
    docs = [tokenize(corpus[d].content(FIELDS)) for d in corpus]
    query = "growing cells in mice cells"
    expected = _reference_bm25(docs, tokenize(query), params.k1, params.b)
    got = bm25.search({"q": query}, depth=10)["q"]
    assert set(got) == {d for d, s in zip(corpus, expected) if s > 0} == {"a", "b", "c"}
    for doc_id, score in zip(corpus, expected):
        if score > 0:
            assert got[doc_id] == pytest.approx(score, abs=1e-6)


def test_query_without_known_token_has_no_result_and_depth_cuts():
    bm25 = BM25Retriever(_corpus({"d1": "cat", "d2": "cat dog", "d3": "cat cat"}), PLAIN, BM25Params(), FIELDS)
    run = bm25.search({"none": "zebra", "cat": "cat"}, depth=2)
    assert run["none"] == {}
    assert len(run["cat"]) == 2


@pytest.mark.scifact
def test_scifact_ndcg_matches_published_bm25(scifact_dir):
    from retrieval_lab.core.config import Params

    dataset = load_dataset(scifact_dir, ["test"])
    params = Params()
    bm25 = BM25Retriever(dataset.corpus, params.tokenizer, params.bm25, params.retrieve.fields)
    run = bm25.search({q: v.text for q, v in dataset.split_queries("test").items()}, 100)
    ndcg = measure_run(dataset.qrels["test"], run, ["nDCG@10"]).means["nDCG@10"]
    # Anserini flat 0.6789 (Lucene English analyzer); ours: Lucene stopwords + Snowball English
    assert abs(ndcg - 0.679) < 0.015
