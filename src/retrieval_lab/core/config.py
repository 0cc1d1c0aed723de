"""All parameters, read in one place and checked: unknown keys and wrong types are errors.

``params.yaml`` maps onto :class:`Params`; each stage takes its own section
(``params.bm25``, ``params.train`` ...). ``--set section.key=value`` overrides use
the same schema, so the command line and the pipeline cannot drift apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import InputError


@dataclass(frozen=True)
class GenerateParams:
    seed: int = 13
    families: int = 40  # incident families; two procedures (positives) each
    confusables_per_family: int = 2  # same component, different incident
    generic_docs: int = 80
    queries_per_family: int = 5
    difficulty: float = 0.5  # P(query is paraphrased) = P(query borrows a confusable's words)


@dataclass(frozen=True)
class PrepareParams:
    seed: int = 7
    train: float = 0.5
    val: float = 0.15
    test: float = 0.35


@dataclass(frozen=True)
class TokenizerParams:
    pattern: str = r"(?u)\b\w+\b"
    lowercase: bool = True
    stopwords: str | None = "english"  # a language name, a path to a word-per-line file, or null
    stemmer: str | None = "english"  # a Snowball language or null


@dataclass(frozen=True)
class RetrieveParams:
    depth: int = 100
    fields: list[str] = field(default_factory=lambda: ["title", "text"])


@dataclass(frozen=True)
class BM25Params:
    k1: float = 1.2
    b: float = 0.75


@dataclass(frozen=True)
class LSAParams:
    dims: int = 128
    algorithm: str = "randomized"
    seed: int = 0


@dataclass(frozen=True)
class DenseParams:
    max_seq_length: int = 256
    batch_size: int = 64
    device: str = "auto"  # auto | cpu | cuda
    bf16: bool = False  # bf16 autocast for encoding (CUDA, or a CPU with AVX512-BF16/AMX); training on CUDA always
    faiss_factory: str = "Flat"  # exact inner product; e.g. "IVF256,Flat" or "HNSW32" for large corpora
    lock: str = "models/base.lock.json"
    seed: int = 0  # FAISS training (IVF k-means) when faiss_factory is not exact


@dataclass(frozen=True)
class FusionParams:
    rrf_k: float = 60.0
    alpha: float = 0.5
    depth: int = 100
    tune: bool = False  # grid search on the qrels given to `fuse --qrels` (train queries); false: fixed values
    rrf_k_grid: list[float] = field(default_factory=lambda: [10.0, 20.0, 40.0, 60.0, 100.0])
    alpha_grid: list[float] = field(default_factory=lambda: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    tune_measure: str = "nDCG@10"


@dataclass(frozen=True)
class MineParams:
    seed: int = 11
    source: str = "dense"  # the retriever whose run is mined (dvc.yaml: runs/<dataset>/<source>.trec)
    count: int = 1
    range_min: int = 4
    range_max: int = 13
    margin: float | None = None  # keep only negatives scoring below (1 - margin) * lowest positive score


@dataclass(frozen=True)
class TrainVariant:
    negatives: str = "hard"  # which mined negatives file: hard | random
    temperature: float = 0.05


@dataclass(frozen=True)
class TrainParams:
    seed: int = 42
    epochs: int = 1
    max_steps: int | None = None
    batch_size: int = 32
    lr: float = 2.0e-5
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float | None = None  # clip the global gradient norm (sentence-transformers uses 1.0); null: off
    max_seq_length: int = 256
    positives_per_query: int = 2  # annotated positives every training query must have ...
    positives_at_least: bool = False  # ... at least (true) or exactly (false) that many
    validate_every: int = 0  # steps; 0 = once per epoch
    variants: dict[str, TrainVariant] = field(default_factory=lambda: {
        "hard": TrainVariant("hard", 0.05),
        "random": TrainVariant("random", 0.05),
        "temperature": TrainVariant("hard", 0.1),
    })


@dataclass(frozen=True)
class EvaluateParams:
    measures: list[str] = field(default_factory=lambda: [
        "Success@1", "Success@10", "R@10", "R@100", "P@10", "RR@10", "RR", "nDCG@10",
        "AP@10", "AP@100", "Judged@10"])
    diagnose_k: int = 10
    judged_threshold: float = 0.5
    ci_level: float = 0.95    # family level of the simultaneous intervals (compare, report, compare-runs)
    permutations: int = 10000   # random sign flips of the paired randomization test
    seed: int = 5


@dataclass(frozen=True)
class CompareParams:
    pairs: list[list[str]] = field(default_factory=lambda: [["dense", "dense-ft-hard"]])
    measure: str = "nDCG@10"
    key_measures: list[str] = field(default_factory=lambda: ["R@100", "RR@10"])  # report: beside measure


@dataclass(frozen=True)
class Params:
    dataset: str = "support"
    generate: GenerateParams = field(default_factory=GenerateParams)
    prepare: PrepareParams = field(default_factory=PrepareParams)
    tokenizer: TokenizerParams = field(default_factory=TokenizerParams)
    retrieve: RetrieveParams = field(default_factory=RetrieveParams)
    bm25: BM25Params = field(default_factory=BM25Params)
    lsa: LSAParams = field(default_factory=LSAParams)
    dense: DenseParams = field(default_factory=DenseParams)
    fusion: FusionParams = field(default_factory=FusionParams)
    mine: MineParams = field(default_factory=MineParams)
    train: TrainParams = field(default_factory=TrainParams)
    evaluate: EvaluateParams = field(default_factory=EvaluateParams)
    compare: CompareParams = field(default_factory=CompareParams)


# ----------------------------------------------------------------------------- checking


def _type_name(tp) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp, where: str, source: str) -> Any:
    """Check ``value`` against the annotation ``tp``; return it (dataclasses built)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        errors = []
        for option in typing.get_args(tp):
            try:
                return _coerce(value, option, where, source)
            except InputError as exc:
                errors.append(exc.reason)
        raise InputError(f"expected {tp}, got {value!r}", source, field=where)
    if tp is type(None):
        if value is None:
            return None
        raise InputError(f"expected null, got {value!r}", source, field=where)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise InputError(f"expected a mapping, got {value!r}", source, field=where)
        return _build(tp, value, where, source)
    if origin is list:
        (item_tp,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise InputError(f"expected a list, got {value!r}", source, field=where)
        return [_coerce(v, item_tp, f"{where}[{i}]", source) for i, v in enumerate(value)]
    if origin is dict:
        _, item_tp = typing.get_args(tp)
        if not isinstance(value, dict):
            raise InputError(f"expected a mapping, got {value!r}", source, field=where)
        return {str(k): _coerce(v, item_tp, f"{where}.{k}", source) for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"expected a number, got {value!r}", source, field=where)
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"expected an integer, got {value!r}", source, field=where)
        return value
    if tp in (str, bool):
        if not isinstance(value, tp):
            raise InputError(f"expected {_type_name(tp)}, got {value!r}", source, field=where)
        return value
    raise TypeError(f"unsupported annotation {tp} at {where}")


def _build(cls, data: dict, prefix: str, source: str):
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        name = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
        raise InputError(f"unknown key (known: {', '.join(sorted(known))})", source, field=name)
    kwargs = {}
    for key, value in data.items():
        where = f"{prefix}.{key}" if prefix else key
        kwargs[key] = _coerce(value, hints[key], where, source)
    return cls(**kwargs)


def params_from_dict(data: dict | None, source: str = "params.yaml") -> Params:
    return _build(Params, data or {}, "", source)


def parse_override(text: str) -> tuple[list[str], Any]:
    """``section.key=value`` → (["section", "key"], value parsed as YAML)."""
    if "=" not in text:
        raise InputError(f"override {text!r} is not of the form section.key=value", field="--set")
    key, raw = text.split("=", 1)
    return key.strip().split("."), yaml.safe_load(raw) if raw.strip() else None


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    data = dict(data or {})
    for text in overrides or []:
        path, value = parse_override(text)
        node = data
        for part in path[:-1]:
            child = node.get(part)
            child = dict(child) if isinstance(child, dict) else {}
            node[part] = child
            node = child
        node[path[-1]] = value
    return data


DEFAULT_PARAMS = "params.yaml"


def load_params(path: str | Path | None = None, overrides: list[str] | None = None) -> Params:
    """Read and check a params file (missing sections take their defaults).

    ``path=None`` reads ``params.yaml`` when the working folder has one and takes every
    default otherwise (a command run outside a pipeline); a named file must exist.
    """
    if path is not None and not Path(path).is_file():
        raise InputError("params file not found", str(path))
    path = Path(DEFAULT_PARAMS if path is None else path)
    data: dict = {}
    if path.exists():
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            line = getattr(getattr(exc, "problem_mark", None), "line", None)
            raise InputError(f"invalid YAML: {exc}", str(path), None if line is None else line + 1)
        if not isinstance(data, dict):
            raise InputError("expected a mapping at the top level", str(path))
    try:
        return params_from_dict(apply_overrides(data, overrides or []), str(path))
    except InputError as exc:
        raise _located(exc, path, overrides or []) from None


def _key_line(path: Path, where: str) -> int | None:
    """1-based line of the dotted key ``where`` (``[i]`` for list items) in a YAML file; None if absent."""
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    line = None
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", where):
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if getattr(k, "value", None) == part), None)
            if match is None:
                break
            line, node = match[0].start_mark.line + 1, match[1]  # the key's line
        elif (isinstance(node, yaml.SequenceNode) and part.startswith("[")
              and int(part[1:-1]) < len(node.value)):
            node = node.value[int(part[1:-1])]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _located(exc: InputError, path: Path, overrides: list[str]) -> InputError:
    """Blame the ``--set`` that supplied the bad value, else the params file's line of the key."""
    where = exc.field or ""
    for text in overrides:
        key = text.split("=", 1)[0].strip()
        if where == key or where.startswith((key + ".", key + "[")):
            return InputError(f"{exc.reason} (from --set {text})", field=where)
    line = _key_line(path, where) if path.exists() and where else None
    return InputError(exc.reason, exc.path, line, exc.field)


def as_dict(obj) -> Any:
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj


def add_params_args(parser: argparse.ArgumentParser) -> None:
    """``--params`` and ``--set``, the same on every command."""
    parser.add_argument("--params", default=None,
                        help=f"params file (default: {DEFAULT_PARAMS} when present, else the built-in defaults)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a parameter, checked against the same schema (repeatable)")


def params_of(args: argparse.Namespace) -> Params:
    return load_params(args.params, args.overrides)
