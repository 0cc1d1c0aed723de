"""The recipe case at ~1,000 recipes: what grows (build time, sizes, latency) and what the 70-recipe labels still say.

    .venv/bin/python scripts/bench_recipes_scale.py [--sizes 70 1000] [--json bench-results/recipes_scale.json]

Runs docs/examples/recipes' own scripts (the SQLite store, the FAISS index with the base model, the
retriever function) in a scratch folder, once per size, in one process on one machine: the ratios
between sizes are the result, the absolute times are this machine's. The collection beyond the 70
written recipes is synthetic: variants of them (``<title> with <an ingredient of another recipe>``,
that ingredient added to the list and the method), near duplicates of real recipes, the hard case
for a retriever. The 50 queries keep their 70-recipe annotations: ``RR@3`` counts only annotated
recipes as relevant, and ``Judged@3`` says how much of each top 3 nobody has judged (how much
pooling and annotation a bigger collection needs before its numbers mean anything).

Per size: SQLite create time and size; index build time (encoding every recipe) and size; through the
retriever the pipeline calls (retrievers/external.py: one call per query, concurrency 1) the
per-query latency p50/p95/p99 and queries/s at k = 3 and k = 10; RR@3 and Judged@3 at k = 3.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import _bench

RESULT = _bench.JsonResult("scripts/bench_recipes_scale.py", ("script", "sizes"))
REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "docs" / "examples" / "recipes"


def synthetic_recipes(size: int, seed: int = 0) -> list[dict]:
    """The 70 written recipes, then seeded variants of them up to ``size``."""
    with open(EXAMPLE / "recipes.tsv", encoding="utf-8", newline="") as fh:
        written = list(csv.DictReader(fh, delimiter="\t"))
    rng = random.Random(seed)
    ingredients = sorted({i.strip() for r in written for i in r["ingredients"].split(",")})
    out = list(written[:size])
    while len(out) < size:
        base, extra = rng.choice(written), rng.choice(ingredients)
        out.append({**base, "id": f"v{len(out):04d}", "title": f"{base['title']} with {extra}",
                    "ingredients": f"{base['ingredients']}, {extra}",
                    "instructions": f"{base['instructions']} Add the {extra} towards the end."})
    return out


def _measure(work: Path, size: int, model, judged: dict[str, set[str]]) -> dict:
    import build_index
    import recipes_db

    from retrieval_lab.core.params import ExternalRetriever as Spec
    from retrieval_lab.retrievers.external import ExternalRetriever

    folder = work / f"n{size}"
    shutil.copytree(EXAMPLE / "retriever", folder / "retriever", ignore=shutil.ignore_patterns("__pycache__"))
    tsv = folder / "recipes.tsv"
    rows = synthetic_recipes(size)
    with open(tsv, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), delimiter="\t")
        writer.writeheader()
        writer.writerows(rows)
    db = folder / "retriever" / "recipes.db"
    t = time.perf_counter()
    recipes_db.create(tsv, db)
    create_s = time.perf_counter() - t
    t = time.perf_counter()
    build_index.build(db, folder / "retriever" / "minilm-256.faiss", 256, model)
    build_s = time.perf_counter() - t
    sys.modules.pop("recipe_search", None)  # each size's own folder, config and index
    with open(EXAMPLE / "queries.tsv", encoding="utf-8", newline="") as fh:
        queries = {r["id"]: r["text"] for r in csv.DictReader(fh, delimiter="\t")}
    corpus = {r["id"] for r in rows}
    out = {"recipes": size, "sqlite_create_s": create_s, "sqlite_bytes": db.stat().st_size,
           "index_build_s": build_s, "index_bytes": (folder / "retriever" / "minilm-256.faiss").stat().st_size}
    for k in (3, 10):
        spec = Spec(path=str(folder / "retriever"), callable="recipe_search:search", k=k)
        retriever = ExternalRetriever(f"minilm-k{k}", spec, corpus, k)
        retriever.collect(dict(list(queries.items())[:3]))  # warm: model and index loaded outside the timing
        collected = retriever.collect(queries)
        summary = collected.timing.summary()
        out[f"k{k}"] = {key: summary[key] for key in ("p50_ms", "p95_ms", "p99_ms", "mean_ms", "qps", "concurrency")}
        if k == 3:
            rr, judged_share = [], []
            for qid, docs in collected.run.items():
                top = list(docs)[:3]
                hits = [i for i, d in enumerate(top, start=1) if d in judged[qid]]
                rr.append(1 / hits[0] if hits else 0.0)
                judged_share.append(sum(d.startswith("r") for d in top) / 3)  # the 70 written recipes were judged
            out["RR@3_annotated_only"] = sum(rr) / len(rr)
            out["Judged@3"] = sum(judged_share) / len(judged_share)
    out["machine"] = collected.timing.machine
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[70, 1000])
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    RESULT.check(args)  # before any work: a bench may run for hours
    sys.path.insert(0, str(EXAMPLE))
    import build_index

    with open(EXAMPLE / "annotator_key.tsv", encoding="utf-8", newline="") as fh:
        judged = {r["query_id"]: set(r["recipes"].split(",")) for r in csv.DictReader(fh, delimiter="\t")}
    model = build_index.encoder()
    with tempfile.TemporaryDirectory() as tmp:
        results = [_measure(Path(tmp), size, model, judged) for size in args.sizes]
    small, large = results[0], results[-1]
    ratios = {"recipes": large["recipes"] / small["recipes"],
              "index_build_s": large["index_build_s"] / small["index_build_s"],
              "index_bytes": large["index_bytes"] / small["index_bytes"],
              "k3_p50_ms": large["k3"]["p50_ms"] / small["k3"]["p50_ms"],
              "k10_p50_ms": large["k10"]["p50_ms"] / small["k10"]["p50_ms"]}
    report = {"script": "scripts/bench_recipes_scale.py", "sizes": results, f"ratio_{large['recipes']}_to_{small['recipes']}": ratios}
    text = json.dumps(report, indent=2) + "\n"
    RESULT.write(args.json, report)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
