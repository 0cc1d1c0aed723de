"""The pool a judging session works through: ``retrieval-lab pool``'s tsv, read back and checked.

Every row is one (query, document) pair to judge, in the pool's order (queries in dataset order,
each by best rank then document id). The texts shown are the pool's own (the title and a 300-character
snippet) or, with a BEIR folder, the whole query and document. Which runs found a document and at what
rank is kept apart (:class:`Item`'s ``best_rank`` and ``retrievers``), so the page can hide it.

A pool from elsewhere is checked like every other input: a one-line error names file, line and field.
A score cell already filled is refused: labels typed into the tsv belong to ``pool --merge``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.data import Doc, Query, ascii_integer, check_id, text_lines
from ..core.errors import InputError

REQUIRED = ("query_id", "query_text", "doc_id", "title", "snippet")
OPTIONAL = ("best_rank", "retrievers", "score")


@dataclass(frozen=True)
class Item:
    """One pair to judge and what the page shows of it."""

    query_id: str
    doc_id: str
    query_text: str
    title: str
    text: str
    best_rank: int | None  # the best rank any pooled run gave it (hidden while judging blind)
    retrievers: tuple[str, ...]  # the runs that found it (hidden while judging blind)

    @property
    def pair(self) -> tuple[str, str]:
        return self.query_id, self.doc_id

    def to_json(self, reveal: bool = False) -> dict:
        out = {"query_id": self.query_id, "doc_id": self.doc_id, "query_text": self.query_text,
               "title": self.title, "text": self.text}
        if reveal:
            out |= {"best_rank": self.best_rank, "retrievers": list(self.retrievers)}
        return out


@dataclass(frozen=True)
class Pool:
    """The pairs of one pool, in its order, and where they came from."""

    source: str
    items: tuple[Item, ...]
    whole_texts: bool  # texts from a BEIR folder (True) or the pool's snippets (False)

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple(item.pair for item in self.items)

    @property
    def queries(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(item.query_id for item in self.items))


def read_pool(path: str | Path, queries: dict[str, Query] | None = None,
              corpus: dict[str, Doc] | None = None) -> Pool:
    """Read a pool tsv; with ``queries`` and ``corpus`` (a BEIR folder) its ids are checked against them and
    their whole texts replace the pool's snippets."""
    path = Path(path)
    header: list[str] | None = None
    col: dict[str, int] = {}
    items: list[Item] = []
    first: dict[tuple[str, str], int] = {}
    for number, line in text_lines(path):
        if not line.strip():
            continue
        cells = line.rstrip("\r\n").split("\t")
        if header is None:
            header = cells
            twice = next((c for i, c in enumerate(header) if c.strip() and c in header[:i]), None)
            if twice is not None:  # which of the two holds the ids? index() would take the first, silently
                raise InputError(f"column {twice!r} appears twice in the header (columns {header.index(twice) + 1} "
                                 f"and {header.index(twice, header.index(twice) + 1) + 1})", str(path), number,
                                 twice)
            missing = [c for c in REQUIRED if c not in header]
            if missing:
                raise InputError(f"header lacks column(s) {', '.join(missing)} (a pool tsv written by "
                                 "`retrieval-lab pool`)", str(path), number)
            col = {c: header.index(c) for c in (*REQUIRED, *OPTIONAL) if c in header}
            continue
        if len(cells) != len(header):
            raise InputError(f"expected {len(header)} tab-separated columns, got {len(cells)}", str(path), number)
        cell = {name: cells[i].strip() for name, i in col.items()}
        for name in ("query_id", "doc_id"):
            if not cell[name]:
                raise InputError("empty id", str(path), number, name)
            check_id(cell[name], path, number, name)
        qid, doc = cell["query_id"], cell["doc_id"]
        if cell.get("score"):
            raise InputError(f"score {cell['score']!r} already filled in: judge reads an unlabelled pool "
                             "(merge a labelled one with `retrieval-lab pool --merge`)", str(path), number, "score")
        if (qid, doc) in first:
            raise InputError(f"pair ({qid}, {doc}) repeated (first on line {first[qid, doc]})", str(path), number,
                             "doc_id")
        first[qid, doc] = number
        rank = None
        if cell.get("best_rank"):
            rank = ascii_integer(cell["best_rank"])
            if rank is None or rank < 1:
                raise InputError(f"best_rank {cell['best_rank']!r} is not a positive integer", str(path), number,
                                 "best_rank")
        found_by = tuple(r for r in cell.get("retrievers", "").split(",") if r)
        query_text, title, text = cell["query_text"], cell["title"], cell["snippet"]
        if queries is not None:
            if qid not in queries:
                raise InputError(f"unknown query id {qid!r} (not in the dataset's queries)", str(path), number,
                                 "query_id")
            query_text = queries[qid].text
        if corpus is not None:
            if doc not in corpus:
                raise InputError(f"unknown document id {doc!r} (not in the dataset's corpus)", str(path), number,
                                 "doc_id")
            title, text = corpus[doc].title, corpus[doc].text
        items.append(Item(qid, doc, query_text, title, text, rank, found_by))
    if header is None:
        raise InputError("empty file: no header", str(path))
    if not items:
        raise InputError("no pair to judge (only a header)", str(path))
    return Pool(str(path), tuple(items), corpus is not None)
