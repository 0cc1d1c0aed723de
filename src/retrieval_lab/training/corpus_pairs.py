"""Training pairs from the corpus itself: a pseudo-query per drawn document, so unlabelled documents train too."""

from __future__ import annotations

import dataclasses
import random
import re
from dataclasses import dataclass

from ..core.data import Dataset
from ..core.errors import InputError
from .batching import Example

# ids of each kind (core/params.py: CORPUS_QUERY_KINDS): pseudo-query prefix, synthetic positive suffix
_PREFIX = {"inverse_cloze": ("~ict:", "#rest"), "title": ("~title:", "#text")}
# a sentence ends at . ! or ? followed by space and a capital, digit or bracket ("e.g. the" stays one sentence)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")


@dataclass(frozen=True)
class CorpusPairs:
    examples: list[Example]  # sorted by query id; one positive each, no mined negative
    query_texts: dict[str, str]
    doc_texts: dict[str, str]  # synthetic positive id -> its text
    relevant: dict[str, set[str]]  # pseudo-query id -> {its synthetic positive, the original document}
    original: dict[str, str]  # synthetic positive id -> the document it was cut from
    kind: str
    drawn: int  # documents drawn
    skipped: int  # drawn documents without a usable title / second sentence

    def summary(self) -> dict:
        return {"kind": self.kind, "drawn": self.drawn, "pairs": len(self.examples), "skipped": self.skipped}


def sentences(text: str) -> list[str]:
    """``text`` cut after each sentence end (``.``, ``!``, ``?`` then a capital, digit or bracket)."""
    return [s for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def drawn_documents(dataset: Dataset, count: int, seed: int) -> list[str]:
    """The first ``count`` of the sorted corpus ids shuffled by ``seed``: without replacement, and the
    documents of a smaller count are a prefix of a larger one's."""
    ids = sorted(dataset.corpus)
    random.Random(f"{seed}:corpus_queries").shuffle(ids)
    return ids[:count]


def _pair(doc, kind: str, seed: int, fields: list[str]) -> tuple[str, str] | None:
    """(query text, positive text) of one document, or None when it has none of this kind."""
    if kind == "title":
        if not doc.title.strip() or not doc.text.strip():
            return None
        return doc.title.strip(), doc.text.strip()
    parts = sentences(doc.text)
    if len(parts) < 2:
        return None
    chosen = random.Random(f"{seed}:{kind}:{doc.id}").randrange(len(parts))
    rest = " ".join(parts[:chosen] + parts[chosen + 1:])
    return parts[chosen], dataclasses.replace(doc, text=rest).content(fields)


def corpus_pairs(dataset: Dataset, count: int, kind: str, seed: int, fields: list[str]) -> CorpusPairs:
    """Pseudo-query pairs from ``count`` documents drawn by ``seed`` (:func:`drawn_documents`); corpus text only.

    ``inverse_cloze``: one sentence of the document's text (chosen by ``seed`` and the document id)
    is the query ``~ict:<id>``; the document without it (its ``fields``, the text one sentence
    shorter) is the positive ``~ict:<id>#rest``. ``title``: the title is the query ``~title:<id>``,
    the text alone the positive ``~title:<id>#text``. A drawn document with one sentence (no title
    or no text) is skipped and counted. Each pseudo-query is relevant to its synthetic positive and
    to the original document, so a batch holding the original never scores it as a negative.
    """
    if kind not in _PREFIX:
        raise ValueError(f"unknown corpus query kind {kind!r}")
    head, tail = _PREFIX[kind]
    examples, query_texts, doc_texts, relevant, original = [], {}, {}, {}, {}
    drawn = drawn_documents(dataset, count, seed)
    for did in drawn:
        pair = _pair(dataset.corpus[did], kind, seed, fields)
        if pair is None:
            continue
        qid, pid = f"{head}{did}", f"{head}{did}{tail}"
        if qid in dataset.queries or pid in dataset.corpus:
            raise InputError(f"the pseudo-query ids {qid!r} / {pid!r} are taken by the dataset",
                             str(dataset.path), field="corpus_queries")
        examples.append(Example(qid, (pid,), ()))
        query_texts[qid], doc_texts[pid] = pair
        relevant[qid], original[pid] = {pid, did}, did
    examples.sort(key=lambda e: e.query_id)
    return CorpusPairs(examples, query_texts, doc_texts, relevant, original, kind, len(drawn),
                       len(drawn) - len(examples))
