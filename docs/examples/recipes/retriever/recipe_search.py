"""The cooking assistant's retriever (the user's code): a query -> the k best recipes, from FAISS and SQLite.

retrieval-lab calls ``search(texts, k)`` (params: ``callable: recipe_search:search``) and reads back one
ranked list of ``(slug, score)`` per query. Everything it reads sits in this folder (retriever.json, the
database, the indexes), so that the pipeline reruns this retriever when any of it changes.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
from pathlib import Path

import faiss
import numpy as np

HERE = Path(__file__).resolve().parent
_LOCK = threading.Lock()  # one tokenizer and one model: calls from several threads take turns


def config() -> dict:
    return json.loads((HERE / "retriever.json").read_text(encoding="utf-8"))


@functools.cache
def _encoder():
    from retrieval_lab.encoder import load

    return load("builtin", "cpu")


@functools.cache
def _index(name: str):
    return faiss.read_index(str(HERE / config()["indexes"][name]["file"]))


def _search(name: str, texts: list[str], k: int) -> list[list[tuple[str, float]]]:
    settings = config()["indexes"][name]
    with _LOCK:
        vectors = _encoder().encode(texts, batch_size=32, max_length=settings["max_seq_length"])
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        faiss.normalize_L2(vectors)
        scores, rowids = _index(name).search(vectors, k)
    wanted = sorted({int(r) for r in rowids.ravel() if r >= 0})
    with sqlite3.connect(HERE / config()["database"]) as con:
        slugs = dict(con.execute(f"SELECT id, slug FROM recipes WHERE id IN ({','.join('?' * len(wanted))})",
                                 wanted).fetchall())
    return [[(slugs[int(r)], float(s)) for s, r in zip(row_scores, row_ids) if r >= 0]
            for row_scores, row_ids in zip(scores, rowids)]


def search(texts: list[str], k: int) -> list[list[tuple[str, float]]]:
    """all-MiniLM-L6-v2 at 256 tokens: the assistant's retriever."""
    return _search("minilm-256", texts, k)


def search_short(texts: list[str], k: int) -> list[list[tuple[str, float]]]:
    """The same model reading only the first 32 tokens of each recipe: the cheap second variant."""
    return _search("minilm-32", texts, k)
