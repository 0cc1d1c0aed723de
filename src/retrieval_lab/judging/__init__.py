"""Judging a pool in the browser (``retrieval-lab judge``): several assessors, their agreement, adjudication,
the judgments that would change a verdict, and the export to qrels.

Modules, one concern each:

* :mod:`.pool_file` reads ``retrieval-lab pool``'s tsv (the pairs and their texts);
* :mod:`.store` keeps the judgments in SQLite, append-only (history and undo);
* :mod:`.agreement` Cohen's and Fleiss' kappa, raw agreement, the disagreements;
* :mod:`.sensitivity` which unjudged documents could move a comparison of two runs;
* :mod:`.export` final labels, merged into existing qrels as ``pool --merge`` does;
* :mod:`.session` who judges what in which order (no HTTP); :mod:`.server` the page and its JSON API.

:func:`open_session` builds a session from files, as the command does.
"""

from __future__ import annotations

from pathlib import Path

from ..core.params import Params
from .pool_file import Pool, read_pool
from .session import Comparison, Session
from .store import LabelRange, assign, create_store, open_store

__all__ = ["Comparison", "LabelRange", "Pool", "Session", "open_session", "query_terms", "read_pool"]


def query_terms(pool: Pool, params: Params) -> dict[str, tuple[str, ...]]:
    """Per query of the pool, the lowercase words to highlight: the words of its texts whose token (the
    project's tokenizer: stopwords dropped, stemmed) is one of the query's."""
    from ..page import highlight_terms
    from ..tokenizer import Tokenizer

    tokenizer = Tokenizer(params.tokenizer)
    queries = {item.query_id: item.query_text for item in pool.items}
    texts = [f"{item.title} {item.text}" for item in pool.items]
    terms = highlight_terms(tokenizer.tokenize, tokenizer.split, tokenizer.finalise, queries.values(), texts)
    return dict(zip(queries, terms))


def open_session(pool_path: str | Path, db_path: str | Path, params: Params, dataset: str | Path | None = None,
                 qrels: str | Path | None = None, base: str | Path | None = None, head: str | Path | None = None,
                 labels: LabelRange | None = None, assessors: list[str] | None = None,
                 measure: str | None = None) -> Session:
    """Read and check the pool (with a BEIR ``dataset``: its ids checked and its whole texts shown), open the
    database (made on first use for this pool and the label range ``labels``, else ``judge.min_label`` ..
    ``judge.max_label``; a database under way keeps its range and refuses another given), store the assignment of ``assessors``
    (``judge.overlap``, ``judge.seed``), read the existing ``qrels`` and the runs ``base`` and ``head``."""
    from ..core.data import read_qrels
    from ..core.errors import InputError
    from ..metrics import parse_measure
    from ..runs import read_run

    judge = params.judge
    if (base is None) != (head is None):
        raise InputError("give both --base and --head (the two runs whose comparison the judging settles)",
                         field="--base" if base is None else "--head")
    key = parse_measure(measure or judge.measure or params.compare.measure)
    queries = corpus = None
    if dataset is not None:
        from ..core.data import corpus_file, queries_file, read_corpus, read_queries

        queries, corpus = read_queries(queries_file(dataset)), read_corpus(corpus_file(dataset))
    pool = read_pool(pool_path, queries, corpus)
    existing = read_qrels(qrels, queries, corpus) if qrels is not None else {}
    comparison = None
    if base is not None:
        ev = params.evaluate
        comparison = Comparison(Path(base).name, Path(head).name, read_run(base), read_run(head), key.name,
                                key.cutoff or judge.depth, ev.ci_level, ev.permutations, ev.seed)
    if not Path(db_path).exists():  # a new session takes the range given, else params'; one under way keeps its own
        create_store(db_path, pool, labels or LabelRange(judge.min_label, judge.max_label))
    store = open_store(db_path, pool, labels)
    if assessors:
        store.set_assignment(assign(pool.queries, assessors, judge.overlap, judge.seed))
    return Session(pool, store, query_terms(pool, params), existing, comparison)
