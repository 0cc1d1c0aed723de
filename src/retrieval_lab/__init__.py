"""Retrieval Lab: reproducible measurement and fine-tuning of text retrievers.

``import retrieval_lab as rl`` is the library API the pipeline's stages are built on::

    data = rl.load_beir("path/to/beir")                 # corpus, queries, qrels per split
    run = rl.BM25().index(data.corpus).search(data.split_queries("test"), k=100)
    result = rl.evaluate(data.qrels["test"], run, ["nDCG@10", "R@100"], train_qrels=data.qrels.get("train"))
    print(result.to_json())

Names load on first use (PEP 562), so ``import retrieval_lab`` stays fast and never imports
torch; only ``rl.Dense`` and ``rl.load_encoder`` load it, when called. docs/api.md lists them all.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> (module, attribute)
_API = {
    # BEIR folders, runs and qrels
    "load_beir": ("core.data", "load_dataset"),
    "write_beir": ("core.data", "write_dataset"),
    "read_corpus": ("core.data", "read_corpus"),
    "read_queries": ("core.data", "read_queries"),
    "read_qrels": ("core.data", "read_qrels"),
    "write_qrels": ("core.data", "write_qrels"),
    "read_run": ("runs", "read_run"),
    "write_run": ("runs", "write_run"),
    "Dataset": ("core.data", "Dataset"),
    "Doc": ("core.data", "Doc"),
    "Query": ("core.data", "Query"),
    "Params": ("core.params", "Params"),
    "load_params": ("core.params_file", "load_params"),
    "InputError": ("core.errors", "InputError"),
    # measuring
    "evaluate": ("evaluation", "evaluate"),
    "Evaluation": ("evaluation", "Evaluation"),
    "parse_measure": ("metrics", "parse_measure"),
    "compare": ("comparison", "compare_runs"),
    "RunsComparison": ("comparison", "RunsComparison"),
    "diagnose": ("evaluation", "diagnose_run"),
    "Diagnosis": ("diagnosis", "Diagnosis"),
    # retrieving
    "BM25": ("retrievers.in_memory", "BM25"),
    "Dense": ("retrievers.in_memory", "Dense"),
    "fuse": ("fusion", "fuse"),
    "FusionResult": ("fusion", "FusionResult"),
    "load_encoder": ("encoder", "load"),
}
__all__ = [
    "BM25",
    "Dataset",
    "Dense",
    "Diagnosis",
    "Doc",
    "Evaluation",
    "FusionResult",
    "InputError",
    "Params",
    "Query",
    "RunsComparison",
    "__version__",
    "compare",
    "diagnose",
    "evaluate",
    "fuse",
    "load_beir",
    "load_encoder",
    "load_params",
    "parse_measure",
    "read_corpus",
    "read_qrels",
    "read_queries",
    "read_run",
    "write_beir",
    "write_qrels",
    "write_run",
]  # _API's names: a literal, so tools read it without importing


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'retrieval_lab' has no attribute {name!r}")
    module, attribute = _API[name]
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
