"""tantivy (the Rust search library's Python binding, ``pip install tantivy``) as the bench_* scripts' BM25 peer.

One indexing thread (``writer(num_threads=1)``, one commit) and one search thread (``Searcher.search``
runs on the caller's); BM25 with tantivy's fixed k1 = 1.2 and b = 0.75 (params.yaml's too). Two analyzers:

``en_stem``  tantivy's English analyzer as shipped: cut at non-alphanumeric characters, drop tokens over
             40 bytes, lowercase, Snowball English; no stop list (the configuration issue 55 measured).
``stop``     the same cut, lowercase, then our stop list (``tokenizer.stopwords``: Lucene's 33 English
             words) and Snowball English: our analysis as closely as tantivy's filters give it.

Each document carries its row in a fast field, read back per hit without fetching a stored document.
A query is lowercased and cut at non-alphanumeric characters before tantivy's query parser reads it,
so that every word is a term (no operator, field or phrase syntax), analysed like the documents; the
terms are OR-ed, as in our BM25.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

ANALYZERS = ("en_stem", "stop")
_SEPARATORS = re.compile(r"[\W_]+")  # what tantivy's simple tokenizer cuts at (not alphanumeric)


def build(texts: Iterable[str], analyzer: str, stopwords: Iterable[str] = (), folder: str | Path | None = None):
    """A tantivy index of ``texts`` (row i: the i-th), in memory or in ``folder`` (an existing, empty one)."""
    import tantivy

    schema = tantivy.SchemaBuilder()
    schema.add_text_field("body", tokenizer_name=analyzer, index_option="freq")  # no positions: BM25 needs none
    schema.add_integer_field("row", fast=True)
    index = tantivy.Index(schema.build(), path=None if folder is None else str(folder))
    if analyzer == "stop":
        index.register_tokenizer("stop", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
                                 .filter(tantivy.Filter.lowercase())
                                 .filter(tantivy.Filter.custom_stopword(sorted(stopwords)))
                                 .filter(tantivy.Filter.stemmer("english")).build())
    elif analyzer != "en_stem":
        raise ValueError(f"analyzer {analyzer!r}: expected one of {ANALYZERS}")
    writer = index.writer(num_threads=1)
    for row, text in enumerate(texts):
        writer.add_document(tantivy.Document(body=text, row=row))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    return index


def search(index, doc_ids: list[str], queries: dict[str, str], depth: int) -> dict[str, dict[str, float]]:
    """Each query's top ``depth`` as a run (document id -> tantivy's score)."""
    searcher = index.searcher()
    run = {}
    for qid, text in queries.items():
        words = _SEPARATORS.sub(" ", text.lower()).strip()
        if not words:
            run[qid] = {}
            continue
        hits = searcher.search(index.parse_query(words, ["body"]), depth, count=False).hits
        rows = searcher.fast_field_values("row", [address for _, address in hits])
        run[qid] = {doc_ids[row]: float(score) for (score, _), row in zip(hits, rows)}
    return run


def stored_lengths(lengths: Iterable[int]) -> dict[int, int]:
    """length -> the length tantivy scores a document of that many tokens with (its one-byte field norm), read
    from tantivy itself: one document of each distinct length, its BM25 explanation's ``dl``."""
    wanted = sorted({int(n) for n in lengths if n > 0})
    index = build((" ".join(["x"] * n) for n in wanted), "en_stem")
    searcher = index.searcher()
    query = index.parse_query("x", ["body"])
    found = {}
    for _, address in searcher.search(query, len(wanted), count=False).hits:
        row = searcher.fast_field_values("row", [address])[0]
        tf_part = json.loads(query.explain(searcher, address).to_json())["details"][2]
        found[wanted[row]] = int(next(d["value"] for d in tf_part["details"] if d["description"].startswith("dl")))
    if len(found) != len(wanted):
        raise RuntimeError(f"tantivy explained {len(found)} of {len(wanted)} lengths")
    return found
