import math

import numpy as np
import pytest

from retrieval_lab.core.data import Doc, load_dataset
from retrieval_lab.core.params import BM25Params, TokenizerParams
from retrieval_lab.metrics import measure_run
from retrieval_lab.retrievers.bm25 import BM25Index, BM25Retriever
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
    from retrieval_lab.core.params import Params

    dataset = load_dataset(scifact_dir, ["test"])
    params = Params()
    bm25 = BM25Retriever(dataset.corpus, params.tokenizer, params.bm25, params.retrieve.fields)
    run = bm25.search({q: v.text for q, v in dataset.split_queries("test").items()}, 100)
    ndcg = measure_run(dataset.qrels["test"], run, ["nDCG@10"]).means["nDCG@10"]
    # Anserini flat 0.6789 (Lucene English analyzer); ours: Lucene stopwords + Snowball English
    assert abs(ndcg - 0.679) < 0.015


# NumPy's dispatch caps: without AVX-512 its SIMD log is the C library's, with it one that
# differs in the last bit for about 1 value in 4,000 (measured on AMD Zen 4).
NO_AVX512 = "AVX512_SPR AVX512_ICL X86_V4"
_RUN_BM25 = """
import sys
from retrieval_lab.core.params import Params
from retrieval_lab.core.data import load_dataset
from retrieval_lab.retrievers.bm25 import BM25Retriever
from retrieval_lab.runs import format_run
dataset, params = load_dataset(sys.argv[1], ["test"]), Params()
bm25 = BM25Retriever(dataset.corpus, params.tokenizer, params.bm25, params.retrieve.fields)
sys.stdout.write(format_run(bm25.search({q: v.text for q, v in dataset.split_queries("test").items()}, 100), "bm25"))
"""


@pytest.mark.scifact
def test_scifact_run_bytes_depend_neither_on_the_process_nor_on_numpys_cpu_dispatch(scifact_dir):
    """The BM25 run is promised byte-identical on every x86-64 CPU (README, Reproducibility).

    Two processes with other string-hash seeds (term ids, and so the order of float sums, must
    not follow set iteration) and one with NumPy's AVX-512 kernels disabled.
    """
    import os
    import subprocess
    import sys

    def run(hash_seed: str, disabled: str) -> str:
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "NPY_DISABLE_CPU_FEATURES": disabled}
        return subprocess.run([sys.executable, "-c", _RUN_BM25, str(scifact_dir)], env=env, check=True,
                              capture_output=True, text=True).stdout

    first = run("1", "")
    assert first.count("\n") > 29_000  # 300 queries, up to 100 documents each
    assert run("2", "") == first
    assert run("3", NO_AVX512) == first


# ----------------------------------------------------------------------------- the compact index (issue 46)


def test_index_arrays_by_hand():
    from retrieval_lab.retrievers.bm25 import BM25Index

    index = BM25Index.from_corpus(_corpus({"d1": "cat sat", "d2": "cat cat dog", "d3": "bird"}), PLAIN, FIELDS)
    # term ids in first-occurrence order; postings term-major, rows ascending within a term
    assert index.terms == ["cat", "sat", "dog", "bird"]
    rows, tf = index.postings_of([0, 1, 2, 3])
    assert rows.tolist() == [0, 1, 0, 1, 2] and tf.tolist() == [1, 2, 1, 1, 1]
    assert index.df_array.tolist() == [2, 1, 1, 1] and index.postings_count == 5
    # each posting the varint of gap << 1 | (tf != 1), then tf's when it is not 1: "cat" is row 0 (0 << 1 | 0),
    # row 1 with tf 2 (1 << 1 | 1, then 2); "sat" row 0; "dog" row 1 (1 << 1); "bird" row 2 (2 << 1)
    assert index.postings.tolist() == [0x00, 0x03, 0x02, 0x00, 0x02, 0x04]
    assert index.offsets.tolist() == [0, 3, 4, 5, 6]
    assert index.lengths.tolist() == [2, 3, 1]
    assert (index.stats.documents, index.stats.total_length, index.stats.avgdl) == (3, 6, 2.0)


def test_the_vocabulary_looks_up_like_the_dict_it_replaces():
    from retrieval_lab.retrievers.bm25 import Vocabulary

    terms = ["cell", "été", "ete", "β-cell", "cel", "cellular", "zz", "", "日本", "a"]
    vocabulary = Vocabulary(terms)
    assert dict(vocabulary.items()) == {t: i for i, t in enumerate(terms)} and vocabulary.terms == terms
    assert list(vocabulary) == terms and len(vocabulary) == 10
    for missing in ("ce", "cells", "b", "zzz", "\ud800", None, 3, b"cell"):  # between keys, past both ends, not str
        assert missing not in vocabulary and vocabulary.get(missing, -1) == -1
    with pytest.raises(KeyError):
        vocabulary["cells"]
    with pytest.raises(ValueError, match="each term once"):
        Vocabulary(["a", "b", "a"])
    assert len(Vocabulary([])) == 0 and Vocabulary([]).get("a") is None


def test_large_gaps_and_term_frequencies_take_more_bytes_by_hand():
    from retrieval_lab.retrievers.bm25 import BM25Index

    # 70,000 = 0b100_0100010_1110000: three 7-bit groups, low first, the high bit set on all but the last
    index = BM25Index.from_corpus(_corpus({"d1": "cat " * 70_000, "d2": "dog"}), PLAIN, FIELDS)
    assert index.postings.tolist() == [0x01, 0xF0, 0xA2, 0x04, 0x02] and index.offsets.tolist() == [0, 4, 5] and index.postings_of([0, 1])[1].tolist() == [
        70_000, 1]
    index = BM25Index.from_corpus(_corpus({"d1": "cat " * 256, "d2": "dog " * 255}), PLAIN, FIELDS)
    assert index.postings_of([0, 1])[1].tolist() == [256, 255]  # past uint8's 255: the build's tf is uint16
    # rows 0 and 64 of "x": 0, then the gap 64 << 1 = 128, two bytes (0x80 0x01)
    index = BM25Index.from_corpus(_corpus({f"d{i}": "x" if i in (0, 64) else "y" for i in range(65)}), PLAIN, FIELDS)
    assert index.postings[:3].tolist() == [0x00, 0x80, 0x01] and index.postings_of([0])[0].tolist() == [0, 64]
    assert index.offsets.tolist() == [0, 3, len(index.postings)]


def _texts(n: int) -> dict[str, Doc]:
    import random

    rng = random.Random(3)
    words = [f"w{i}" for i in range(60)] + ["the", "of", "running", "runs", "ran"]
    return {f"d{i}": Doc(f"d{i}", rng.choice(words), " ".join(rng.choices(words, k=rng.randint(0, 30))))
            for i in range(n)}


def test_chunked_spilled_saved_and_memory_mapped_index_gives_the_same_run_bytes(tmp_path):
    """Chunks of 1, 7 and all documents, spilled or not, saved and read back memory-mapped: one run."""
    from retrieval_lab.core.params import Params
    from retrieval_lab.retrievers.bm25 import BM25Index, build_in, corpus_items
    from retrieval_lab.runs import format_run

    corpus, params = _texts(200), Params()
    queries = {f"q{i}": " ".join(list(corpus.values())[i * 7].text.split()[:4]) or "w1" for i in range(20)}
    ref = BM25Index.from_corpus(corpus, params.tokenizer, FIELDS, chunk=10_000)
    expected = format_run(BM25Retriever.from_index(ref, params.bm25).search(queries, 10), "bm25")
    assert expected.count("\n") > 100
    for chunk in (1, 7):
        (tmp_path / str(chunk)).mkdir()
        built = build_in(tmp_path / str(chunk), corpus_items(corpus, FIELDS), params.tokenizer, FIELDS, chunk)
        loaded = BM25Index.load(tmp_path / str(chunk))
        assert isinstance(loaded.postings, np.memmap)
        for index in (built, loaded):
            for name in ("offsets", "postings", "df_array", "lengths"):
                assert np.array_equal(getattr(index, name), getattr(ref, name)), name
            assert index.terms == ref.terms and index.doc_ids == ref.doc_ids
            assert format_run(BM25Retriever.from_index(index, params.bm25).search(queries, 10), "bm25") == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1", "7"]  # the spilled chunks are gone


def test_loading_never_unpickles_and_names_the_bad_file(tmp_path):
    from retrieval_lab.core.errors import InputError
    from retrieval_lab.retrievers.bm25 import BM25Index

    BM25Index.from_corpus(_corpus({"d1": "cat", "d2": "dog"}), PLAIN, FIELDS).save(tmp_path)
    np.save(tmp_path / "postings.npy", np.array([object(), object()], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="postings.npy"):
        BM25Index.load(tmp_path)
    (tmp_path / "index.json").write_text('{"format": "other"}')
    with pytest.raises(InputError, match="index.json"):
        BM25Index.load(tmp_path)


# ----------------------------------------------------------------------------- the compiled loop (issue 55)


@pytest.fixture
def kernel_calls(monkeypatch):
    """The number of times the compiled loop ran, as a list to read after the searches."""
    from retrieval_lab.retrievers import _bm25_kernel

    calls, real = [], _bm25_kernel.top_rows
    monkeypatch.setattr(_bm25_kernel, "top_rows", lambda *a: calls.append(1) or real(*a))
    return calls


def test_a_tie_past_the_room_is_kept_whole_and_a_negative_weight_goes_to_numpy(kernel_calls):
    from retrieval_lab.retrievers.bm25 import query_plan

    bm25 = BM25Retriever(_corpus({f"d{i}": "common filler" for i in range(2_000)}), PLAIN, BM25Params(), FIELDS)
    plan = query_plan(bm25.index, ["common", "filler"], bm25.stats)
    numpy_rows, numpy_values = bm25.index.scores(plan, bm25._norm)
    assert kernel_calls == [] and len(numpy_rows) == 2_000  # NumPy: every document, top_k cuts
    rows, values = bm25.index.top(plan, bm25._norm, depth=10)
    assert len(kernel_calls) >= 2  # the 2,000 tie: every one kept, after a retry with more room than 4 x 10
    assert sorted(rows.tolist()) == numpy_rows.tolist() and values.tobytes() == numpy_values[rows].tobytes()
    calls = len(kernel_calls)
    negative = [(term, -weight, repeats) for term, weight, repeats in plan]  # the loop's sums need positive impacts
    rows, values = bm25.index.top(negative, bm25._norm, depth=10)
    assert len(kernel_calls) == calls and len(rows) == 2_000 and (values < 0).all()


def test_the_compiled_loop_by_hand_keeps_the_best_document_and_every_tie_at_the_cut(kernel_calls):
    """"rare common" over ten documents that all hold "common", d3 "rare" too (idf(rare) = ln(1 + 9.5 / 1.5),
    idf(common) = ln(1 + 0.5 / 10.5)): at depth 1 only d3; at depth 2 the nine others tie at the cut, all kept
    (ten candidates: more than the 8 a depth of 2 has room for, so the loop runs again with twice the room)."""
    from retrieval_lab.retrievers.bm25 import query_plan

    texts = {f"d{i}": "common filler" for i in range(10)}
    texts["d3"] = "rare common"
    bm25 = BM25Retriever(_corpus(texts), PLAIN, BM25Params(), FIELDS)
    plan = query_plan(bm25.index, ["rare", "common"], bm25.stats)
    rows, values = bm25.index.top(plan, bm25._norm, depth=1)
    assert rows.tolist() == [3] and kernel_calls == [1]
    norm = 1.2 * (1 - 0.75 + 0.75 * 2 / 2)  # every document 2 tokens long: |d| / avgdl = 1
    rare, common = math.log(1 + 9.5 / 1.5), math.log(1 + 0.5 / 10.5)
    assert values.tolist() == [rare * 1 / (norm + 1) + common * 1 / (norm + 1)]  # plan order: "common" has id 0
    rows, values = bm25.index.top(plan, bm25._norm, depth=2)
    assert sorted(rows.tolist()) == list(range(10)) and len(kernel_calls) == 3  # ran full once, then fitted
    assert sorted(values.tolist()) == [common * 1 / (norm + 1)] * 9 + [values.max()]
    rows, _ = bm25.index.top(plan, bm25._norm, depth=10**9)  # room for the 10 documents, not for 4 x 10**9
    assert sorted(rows.tolist()) == list(range(10)) and len(bm25.index._local.scratch[1]) == 10


def _tied_texts(n: int) -> dict[str, Doc]:
    """Documents from few words, many repeated whole: scores tie at every cut."""
    import random

    rng = random.Random(11)
    words = [f"w{i}" for i in range(25)] + ["zeta"] * 3 + ["rho"]
    made = [" ".join(rng.choices(words, k=rng.randint(1, 12))) for _ in range(n // 3)]
    return {f"d{i:04d}": Doc(f"d{i:04d}", "", rng.choice(made)) for i in range(n)}


@pytest.mark.parametrize("repeat_word", [1, 300])  # 300: a term frequency of two varint bytes (uint16 in the build)
def test_the_compiled_loop_equals_the_exhaustive_sum_bit_for_bit_at_every_depth(kernel_calls, repeat_word):
    """Against :meth:`BM25Index.scores` (NumPy) cut by ``top_k``: the same documents, order and float bits, ties at
    the cut included, for queries of 1 to 8 terms (repeats too) and depths from 1 to past the collection; and
    the reused sums left at zero after each query."""
    import random

    from retrieval_lab.retrievers.base import top_k
    from retrieval_lab.retrievers.bm25 import query_plan

    corpus = _tied_texts(600)
    corpus["d0007"] = Doc("d0007", "", " ".join(["zeta"] * repeat_word + ["w3"]))
    bm25 = BM25Retriever(corpus, PLAIN, BM25Params(k1=0.9, b=0.4), FIELDS)
    assert (bm25.index.postings_of([bm25.index.vocab["zeta"]])[1].max() == 300) == (repeat_word == 300)
    rng = random.Random(5)
    words = [f"w{i}" for i in range(25)] + ["zeta", "rho", "unknown"]
    compared = 0
    for _ in range(150):
        query = " ".join(rng.choices(words, k=rng.randint(1, 8)))
        plan = query_plan(bm25.index, bm25._tokenize(query), bm25.stats)
        rows, values = bm25.index.scores(plan, bm25._norm)
        for depth in (1, 3, 10, 57, 1000):
            expected = list(top_k(values, bm25.doc_ids, depth, positive_only=True, rows=rows).items())
            got = list(bm25.ranked(query, depth).items())
            assert got == expected, (query, depth)
            compared += 1
        assert not bm25.index._local.scratch[0].any()
    assert compared == 750 and len(kernel_calls) >= 700  # every query the index knows a term of


def test_workers_split_the_queries_and_give_the_same_run_bytes(monkeypatch):
    import retrieval_lab.retrievers.bm25 as bm25_module
    from retrieval_lab.runs import format_run

    corpus = _texts(300)
    queries = {f"q{i}": " ".join(list(corpus.values())[i * 3].text.split()[:5]) or "w1" for i in range(90)}
    expected = format_run(BM25Retriever(corpus, PLAIN, BM25Params(), FIELDS).search(queries, 20), "bm25")
    forked = []
    real = bm25_module._search_forked
    monkeypatch.setattr(bm25_module, "_search_forked", lambda *a: forked.append(a[3]) or real(*a))
    got = BM25Retriever(corpus, PLAIN, BM25Params(workers=2), FIELDS).search(queries, 20)
    assert forked == [2] and list(got) == list(queries)
    assert format_run(got, "bm25") == expected
    assert BM25Retriever(corpus, PLAIN, BM25Params(workers=3), FIELDS).search({"q": "w1"}, 5) == \
        BM25Retriever(corpus, PLAIN, BM25Params(), FIELDS).search({"q": "w1"}, 5)  # one query: no fork
    assert forked == [2]


@pytest.mark.scifact
def test_scifact_run_of_the_compiled_loop_is_the_exhaustive_run(scifact_dir):
    """Every SciFact query (1,109) at depths 10 and 1,000: the compiled loop gives NumPy's exhaustive sum's run."""
    from retrieval_lab.core.params import Params
    from retrieval_lab.retrievers.base import top_k
    from retrieval_lab.runs import format_run

    dataset, params = load_dataset(scifact_dir), Params()
    bm25 = BM25Retriever(dataset.corpus, params.tokenizer, params.bm25, params.retrieve.fields)
    queries = {q: v.text for q, v in dataset.queries.items()}
    exhaustive = {q: bm25.scores(text) for q, text in queries.items()}
    for depth in (10, 1000):
        expected = {q: top_k(values, bm25.doc_ids, depth, positive_only=True, rows=rows)
                    for q, (rows, values) in exhaustive.items()}
        assert format_run(bm25.search(queries, depth), "bm25") == format_run(expected, "bm25")


def test_threads_searching_one_retriever_get_the_sequential_run():
    """Each thread has its own sums (the loop releases the GIL): shared ones would mix two queries' sums."""
    from concurrent.futures import ThreadPoolExecutor

    corpus = _tied_texts(400)
    bm25 = BM25Retriever(corpus, PLAIN, BM25Params(), FIELDS)
    queries = [" ".join(f"w{(i * 7 + k) % 25}" for k in range(1 + i % 6)) + " zeta" for i in range(200)]
    expected = [bm25.ranked(q, 7) for q in queries]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda q: bm25.ranked(q, 7), queries * 3))
    assert got == expected * 3


def test_a_search_interrupted_midway_leaves_no_trace_in_the_next(monkeypatch):
    from retrieval_lab.retrievers import _bm25_kernel

    corpus = _tied_texts(300)
    bm25 = BM25Retriever(corpus, PLAIN, BM25Params(), FIELDS)
    query = "w1 w2 w3 zeta rho"
    expected = bm25.ranked(query, 5)
    real = _bm25_kernel.top_rows

    def interrupted(offsets, postings, df, norm, codes, code_size, terms, idfs, repeats, depth, sums, rows, values):
        sums[bm25.index.postings_of(terms[:1])[0]] += 1.0  # the partial sums of the first term, then stopped
        raise KeyboardInterrupt

    monkeypatch.setattr(_bm25_kernel, "top_rows", interrupted)
    with pytest.raises(KeyboardInterrupt):
        bm25.ranked(query, 5)
    monkeypatch.setattr(_bm25_kernel, "top_rows", real)
    assert bm25.ranked(query, 5) == expected


def _plain_build(texts: list[str], tokenizer: TokenizerParams):
    """An independent build: each document through Tokenizer.tokenize, term ids in order of first occurrence,
    postings term-major with rows ascending."""
    tokenize, vocab, postings, lengths = Tokenizer(tokenizer).tokenize, {}, {}, []
    for row, text in enumerate(texts):
        tokens = tokenize(text)
        lengths.append(len(tokens))
        for token in tokens:
            term = vocab.setdefault(token, len(vocab))
            postings.setdefault(term, {}).setdefault(row, 0)
            postings[term][row] += 1
    indptr = np.cumsum([0] + [len(postings[t]) for t in range(len(vocab))])
    docs = [row for t in range(len(vocab)) for row in postings[t]]
    tf = [n for t in range(len(vocab)) for n in postings[t].values()]
    return list(vocab), indptr, docs, tf, lengths


def _varints(indptr, docs: list[int], tf: list[int]) -> bytes:
    """The postings format written out from its definition (bm25.py, _bm25_kernel.c): an independent encoder."""
    def varint(value: int) -> bytes:
        out = bytearray()
        while value >= 0x80:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        return bytes(out + bytes([value]))

    out = b""
    for t in range(len(indptr) - 1):
        previous = 0
        for p in range(indptr[t], indptr[t + 1]):
            out += varint((docs[p] - previous) << 1 | (tf[p] != 1)) + (varint(tf[p]) if tf[p] != 1 else b"")
            previous = docs[p]
    return out


@pytest.mark.parametrize("chunk, group, memo_limit", [(1000, 32_768, 2_000_000), (3, 5, 4), (1, 1, 0)])
def test_the_build_gives_a_plain_builds_arrays_on_unicode_text(monkeypatch, chunk, group, memo_limit):
    """Pieces memoised across chunks and groups (and the memo cleared between chunks), pieces of several tokens
    ("10–20", "patient’s"), of none ("±", a stopword): the arrays of a build that tokenizes every document."""
    import random

    from retrieval_lab.retrievers import bm25

    monkeypatch.setattr(bm25, "_GROUP", group)
    monkeypatch.setattr(bm25, "_MEMO_LIMIT", memo_limit)
    rng = random.Random(5)
    words = ["The", "cells", "cell", "of", "10–20", "patient’s", "Patients", "±", "ΟΔΟΣ", "e\u0301te", "été",
             "x=\u0338y", "naïve", "Running", "runs", "β-cells", "a_b", "½", "İstanbul", ""]
    texts = [" ".join(rng.choices(words, k=rng.randint(0, 12))) + rng.choice(["", ".", " ’"]) for _ in range(60)]
    corpus = {f"d{i}": Doc(f"d{i}", "", text) for i, text in enumerate(texts)}
    tokenizer = TokenizerParams()
    index = BM25Index.from_corpus(corpus, tokenizer, FIELDS, chunk=chunk)
    terms, indptr, docs, tf, lengths = _plain_build([doc.content(FIELDS) for doc in corpus.values()], tokenizer)
    assert index.terms == terms and len(terms) > 15
    rows, frequencies = index.postings_of(range(len(terms)))
    assert rows.tolist() == docs and frequencies.tolist() == tf and index.df_array.tolist() == np.diff(indptr).tolist()
    assert index.postings.tobytes() == _varints(indptr, docs, tf)
    assert index.lengths.tolist() == lengths and index.doc_ids == list(corpus)


def test_a_query_of_several_terms_sums_in_plan_order_bit_for_bit():
    """The postings of a query's terms gathered at once: each document's score is the float sum, term by term in
    plan order, of idf * tf / (tf + norm) * repeats, bit for bit (here in plain Python floats)."""
    from retrieval_lab.retrievers.bm25 import query_plan

    corpus, params = _texts(300), BM25Params()
    bm25 = BM25Retriever(corpus, PLAIN, params, FIELDS)
    index, norm = bm25.index, bm25._norm
    for query in ("w1 w2 w3 w1 the", "running w7", "w9", "w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 of"):
        plan = query_plan(index, Tokenizer(PLAIN).tokenize(query), bm25.stats)
        expected: dict[int, float] = {}
        for term, weight, repeats in plan:
            for row, tf in zip(*(column.tolist() for column in index.postings_of([term]))):
                length = int(index.lengths[row])  # the norm in plain floats from the document's length
                doc_norm = params.k1 * (1.0 - params.b + params.b * length / bm25.stats.avgdl)
                expected[row] = expected.get(row, 0.0) + weight * tf / (tf + doc_norm) * repeats
        rows, values = index.scores(plan, norm)
        assert dict(zip(rows.tolist(), values.tolist())) == expected and len(expected) > 10


def test_the_kernel_refuses_arrays_that_do_not_fit_instead_of_reading_past_them():
    """Its arrays come through the buffer protocol: every length is checked against the others."""
    from retrieval_lab.retrievers import _bm25_kernel

    index = BM25Index.from_corpus(_corpus({"d1": "cat sat", "d2": "cat cat dog", "d3": "bird"}), PLAIN, FIELDS)
    arrays = (index.offsets, index.postings, index.df_array)
    codes = index._length_codes
    norm, terms = index.norms(index.stats, BM25Params()), np.array([0, 2], np.int64)
    sums, rows, values = np.zeros(3), np.empty(3, np.int32), np.empty(3)

    def top(*, terms=terms, sums=sums, depth=2):
        return _bm25_kernel.top_rows(*arrays, norm, codes, 1, terms, np.ones(len(terms)), np.ones(len(terms)), depth,
                                     sums, rows, values)

    assert top() == 2 and not sums.any()  # "cat" or "dog": d1 and d2
    for bad in ({"terms": np.array([0, 4], np.int64)}, {"sums": np.zeros(4)}, {"depth": 0}):
        with pytest.raises(ValueError):
            top(**bad)
    assert not sums.any()  # a refused call leaves the sums as they were
    with pytest.raises(ValueError, match="do not fit"):
        _bm25_kernel.decode(*arrays, np.array([0], np.int64), np.empty(1, np.int32), np.empty(1, np.uint32))  # df 2
    for not_a_buffer in ((np.array([0, 2], np.int64), [0, 1], np.ones(2, np.uint8)),
                         (np.array([0, 2], np.int64), np.array([0, 1], np.int32), None)):
        with pytest.raises(TypeError):  # a refused buffer is an error, never a result
            _bm25_kernel.encode(*not_a_buffer, 1, np.empty(2, np.int64))
    with pytest.raises(ValueError, match="rising"):
        _bm25_kernel.encode(np.array([0, 2], np.int64), np.array([1, 1], np.int32), np.ones(2, np.uint8), 1,
                            np.empty(2, np.int64))
    damaged = index.postings.copy()
    damaged[1] = 0x00  # "cat": row 0, then a gap of 0 (row 0 again)
    assert _bm25_kernel.check(index.offsets, damaged, index.df_array, 3)[0] == "postings"
    with pytest.raises(ValueError, match="damaged"):
        _bm25_kernel.top_rows(index.offsets, damaged, index.df_array, norm, codes, 1, np.array([0], np.int64),
                              np.ones(1), np.ones(1), 2, sums, rows, values)
    assert not sums.any()  # cleared on the way out
