"""Retriever registry: ``--retriever NAME`` -> class; valid choices and errors come from here.

Every retriever is built by ``from_inputs(params, dataset=..., embeddings=...)`` and
answers ``search(queries: dict[qid, text], depth) -> Run``. ``needs`` says which input
it is built from: "dataset" (a BEIR folder) or "embeddings" (an embeddings folder, or
a BEIR folder encoded on the fly).
"""

from __future__ import annotations

import importlib

from ..core.errors import InputError

# name -> "module:Class", imported on demand so lexical runs never load torch or faiss
REGISTRY = {
    "bm25": "bm25:BM25Retriever",
    "lsa": "lsa:LSARetriever",
    "dense": "dense:DenseRetriever",
    "external": "external:ExternalRetriever",  # the user's own (params external.<name>; --external NAME)
}


# retrievers with an index on disk: `retrieval-lab index` writes it, `retrieve --index` reads it (their class
# has build_index(items, folder, params) and from_index_folder(folder, params))
INDEXED = ("bm25",)

# retrievers that run in shards on a Dask cluster when their params say shards > 1 (core/cluster.py): name ->
# "module:Class" whose class has from_inputs(params, dataset=, embeddings=, progress=) and, for an indexed one,
# is_index(folder), from_index_folder(folder, params, progress) and build_index_from(corpus, folder, params,
# progress); imported by name too, so that the one-process retrievers never import Dask's side
SHARDED = {
    "bm25": "bm25_sharded:ShardedBM25",
    "dense": "dense_sharded:ShardedDense",
}


def names() -> list[str]:
    return sorted(REGISTRY)


def get(name: str, field: str = "--retriever"):
    if name not in REGISTRY:
        raise InputError(f"unknown retriever {name!r} (choices: {', '.join(names())})", field=field)
    module_name, class_name = REGISTRY[name].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module_name}"), class_name)


def from_index(name: str, folder, params, dataset):
    """The retriever ``name`` read from its index ``folder``, refused in one line unless the folder records the
    corpus of the BEIR folder ``dataset`` (:mod:`core.fingerprint`): an index of another corpus would rank
    documents the dataset does not have."""
    from ..core import fingerprint

    fingerprint.check(fingerprint.read(folder), dataset, str(folder), "--corpus", fingerprint.INDEX_AGAIN)
    return get(name).from_index_folder(folder, params)


def module_of(name: str) -> str:
    """The module ``--retriever NAME`` loads (dvc.yaml must list it as the stage's dependency)."""
    get(name)
    return f"{__name__}.{REGISTRY[name].split(':')[0]}"


def sharded(name: str):
    """The class that runs ``name`` in shards (``<name>.shards`` > 1), or None for a retriever without shards."""
    if name not in SHARDED:
        return None
    module_name, class_name = SHARDED[name].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module_name}"), class_name)


def modules_of(name: str) -> list[str]:
    """Every module ``--retriever NAME`` may load: its own, and the one running it in shards."""
    sharded_module = [f"{__name__}.{SHARDED[name].split(':')[0]}"] if name in SHARDED else []
    return [module_of(name), *sharded_module]
