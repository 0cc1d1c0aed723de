"""The cooking assistant's recipe store (the user's code, not retrieval-lab's): a real SQLite database.

    python recipes_db.py create recipes.tsv retriever/recipes.db     # the store the assistant reads
    python recipes_db.py export retriever/recipes.db queries.tsv beir  # a BEIR folder for retrieval-lab

The BEIR folder holds the recipes (corpus.jsonl: id = the recipe's slug), the test queries and an empty
qrels/test.tsv: the judgments come later, from annotating the pooled results (docs/own-retriever.md).
"""

from __future__ import annotations

import csv
import json
import sqlite3
import sys
from pathlib import Path

SCHEMA = """CREATE TABLE recipes (
    id INTEGER PRIMARY KEY,          -- the FAISS index stores this rowid
    slug TEXT NOT NULL UNIQUE,       -- what the assistant (and retrieval-lab) calls the recipe
    title TEXT NOT NULL,
    cuisine TEXT NOT NULL,
    minutes INTEGER NOT NULL,
    tags TEXT NOT NULL,
    ingredients TEXT NOT NULL,
    instructions TEXT NOT NULL)"""


def rows(tsv: str | Path) -> list[dict]:
    with open(tsv, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def create(recipes_tsv: str | Path, db_path: str | Path) -> int:
    db_path = Path(db_path)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    db_path.unlink(missing_ok=True)
    with sqlite3.connect(db_path) as con:
        con.execute(SCHEMA)
        con.executemany("INSERT INTO recipes (slug, title, cuisine, minutes, tags, ingredients, instructions) "
                        "VALUES (:id, :title, :cuisine, :minutes, :tags, :ingredients, :instructions)",
                        rows(recipes_tsv))
        return con.execute("SELECT count(*) FROM recipes").fetchone()[0]


def document_text(title: str, ingredients: str, instructions: str) -> str:
    """What is embedded and what an annotator reads: one text per recipe."""
    return f"{title}. Ingredients: {ingredients}. {instructions}"


def export(db_path: str | Path, queries_tsv: str | Path, out: str | Path) -> None:
    out = Path(out)
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(db_path) as con:
        recipes = con.execute("SELECT slug, title, ingredients, instructions FROM recipes ORDER BY id").fetchall()
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps({"_id": slug, "title": title, "text": f"Ingredients: {ingredients}. {instructions}"})
                      + "\n" for slug, title, ingredients, instructions in recipes)
    with open(out / "queries.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps({"_id": q["id"], "text": q["text"]}) + "\n" for q in rows(queries_tsv))
    (out / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n", encoding="utf-8")


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    print(create(*args) if command == "create" else export(*args))
