"""All parameters, read in one place and checked: unknown keys and wrong types are errors.

``params.yaml`` maps onto :class:`Params`; each stage takes its own section
(the built-in defaults below equal the repository's params.yaml, key for key, except
``dense.models.dense``: ``builtin`` is the packaged copy of ``models/base.lock.json``;
``tests/test_config.py`` fails when they drift, so a command run outside the pipeline
behaves as the pipeline does)
(``params.bm25``, ``params.train`` ...). ``--set section.key=value`` overrides use
the same schema, so the command line and the pipeline cannot drift apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
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
    val_from_train: float = 0.15  # given splits without qrels/dev.tsv or val.tsv: validation carved from train
    val_unseen: bool = True  # carve whole groups of queries sharing positives: validation measures unseen docs


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
    seed: int = 0  # FAISS training (IVF k-means) when faiss_factory is not exact
    # run name -> model: builtin (the lock shipped in the package), a lock file, a model folder or
    # hub:NAME@REVISION; dvc.yaml gives each its encode, retrieve and evaluate stages
    models: dict[str, str] = field(default_factory=lambda: {"dense": "builtin"})


@dataclass(frozen=True)
class FusionMethod:
    """A fusion method's one parameter (the method's module says what it means and which values are valid)."""
    value: float  # used when fusion.tune is false or no qrels are given
    grid: list[float]  # tried when tuning


@dataclass(frozen=True)
class FusionParams:
    dense: str = "dense-ft-query"  # the dense run fused with bm25 (dvc.yaml: runs/<dataset>/<dense>.trec)
    depth: int = 100
    tune: bool = True  # grid search on the qrels given to `fuse --qrels` (val queries); false: fixed values
    tune_measure: str = "nDCG@10"
    # a name in the fusion registry (src/retrieval_lab/fusion) -> its parameter; dvc.yaml fuses once per entry
    methods: dict[str, FusionMethod] = field(default_factory=lambda: {
        "rrf": FusionMethod(60.0, [10.0, 20.0, 40.0, 60.0, 100.0]),
        "weighted": FusionMethod(0.5, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]),
    })


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
    side: str = "both"  # both: fine-tune on batch documents; query: only the query side, every document's
    #                     frozen base embedding a candidate (training/loop.py: train_step)
    epochs: int | None = None  # this variant's epochs (null: train.epochs)


@dataclass(frozen=True)
class TrainParams:
    seed: int = 42
    epochs: int = 2
    max_steps: int | None = None
    batch_size: int = 32
    lr: float = 2.0e-5
    schedule: str = "linear"  # learning-rate factor after warmup: constant | linear (to 0) | cosine (to 0)
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float | None = None  # clip the global gradient norm (sentence-transformers uses 1.0); null: off
    max_seq_length: int = 256
    positives_per_query: int = 2  # annotated positives every training query must have ...
    positives_at_least: bool = False  # ... at least (true) or exactly (false) that many
    validate_every: int = 0  # steps; 0 = once per epoch
    select: str = "best"  # the weights kept: best (on the val split, step 0 = the base model included) | last
    select_measure: str = "nDCG@10"  # what best means; one of evaluate.measures
    patience: int | None = None  # stop after this many validations without improvement (null: never)
    loss: str = "multi_positive_nce"  # a name in the losses registry (src/retrieval_lab/losses)
    base: str = "dense"  # the model fine-tuned: a name under dense.models
    variants: dict[str, TrainVariant] = field(default_factory=lambda: {
        "hard": TrainVariant("hard", 0.05),
        "random": TrainVariant("random", 0.05),
        "temperature": TrainVariant("hard", 0.1),
        "query": TrainVariant("hard", 0.05, side="query", epochs=10),
    })


@dataclass(frozen=True)
class EvaluateParams:
    measures: list[str] = field(default_factory=lambda: [
        "Success@1", "Success@10", "R@10", "R@100", "P@10", "RR@10", "RR", "nDCG@10",
        "AP@10", "AP@100", "Judged@10"])
    diagnose_k: int = 10
    judged_threshold: float = 0.1
    ci_level: float = 0.95    # family level of the simultaneous intervals (compare, report, compare-runs)
    permutations: int = 10000   # random sign flips of the paired randomization test
    seed: int = 5


@dataclass(frozen=True)
class CompareParams:
    pairs: list[list[str]] = field(default_factory=lambda: [
        ["dense", "dense-ft-hard"], ["dense", "dense-ft-query"], ["dense-ft-hard", "dense-ft-query"],
        ["bm25", "dense"], ["dense-ft-query", "fused-rrf"], ["bm25", "fused-rrf"],
        ["dense-ft-query", "fused-weighted"], ["bm25", "fused-weighted"]])
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


# ----------------------------------------------------------------------------- values
# What a value must be beyond its type, checked when params are read, so that no command
# meets a bad value halfway through its work. The modules that use a value may check more
# (a file's existence, a measure's family): those checks need what core does not import.

STOPWORD_LANGUAGES = {  # tokenizer.stopwords name -> the list bm25s ships
    "english": "STOPWORDS_EN", "english_plus": "STOPWORDS_EN_PLUS", "german": "STOPWORDS_GERMAN",
    "dutch": "STOPWORDS_DUTCH", "french": "STOPWORDS_FRENCH", "spanish": "STOPWORDS_SPANISH",
    "portuguese": "STOPWORDS_PORTUGUESE", "italian": "STOPWORDS_ITALIAN",
    "russian": "STOPWORDS_RUSSIAN", "swedish": "STOPWORDS_SWEDISH",
    "norwegian": "STOPWORDS_NORWEGIAN", "danish": "STOPWORDS_DANISH",
    "turkish": "STOPWORDS_TURKISH", "chinese": "STOPWORDS_CHINESE", "korean": "STOPWORDS_KOREAN",
}
LSA_ALGORITHMS = ("randomized", "arpack")
FIELDS = ("title", "text")
NEGATIVES = ("hard", "random")
SIDES = ("both", "query")
SCHEDULES = ("constant", "linear", "cosine")  # training/loop.py: schedule_factor
SELECTIONS = ("best", "last")
MAX_PERMUTATIONS = 10**7  # stats.py: each pass over the sign flips draws queries x permutations numbers

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")  # a dataset, run or variant name: also a path part
_MEASURE = re.compile(r"[A-Za-z]+(\([A-Za-z0-9=,_ ]*\))?(@\d+)?")
_FAISS_FACTORY = re.compile(r"[A-Za-z0-9_.]+(,[A-Za-z0-9_.]+)*")


def token_pattern(pattern: str, source: str | None = "params.yaml") -> re.Pattern:
    """Compile ``tokenizer.pattern``: a valid regex, no capturing group, never matching ""."""
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise InputError(f"invalid regex {pattern!r}: {exc}", source, field="tokenizer.pattern") from None
    if regex.groups:  # findall would return the groups, not the tokens
        raise InputError("pattern must not contain capturing groups (use (?:...))", source,
                         field="tokenizer.pattern")
    if regex.fullmatch(""):
        raise InputError("pattern matches the empty string", source, field="tokenizer.pattern")
    return regex


def is_stopword_file(spec: str) -> bool:
    """A ``tokenizer.stopwords`` value naming a file rather than a language."""
    path = Path(spec)
    if path.suffix or "/" in spec:
        return True
    try:
        return path.exists()
    except (OSError, ValueError):  # a name too long, or holding a NUL, names no file
        return False


def _stemmer(value):
    import Stemmer

    if value not in Stemmer.algorithms():
        return f"unknown stemmer {value!r} (choices: {', '.join(Stemmer.algorithms())}; none: no stemming)"
    return None


def _reason(check, value):
    try:
        check(value)
    except InputError as exc:
        return exc.reason
    return None


def _between(low, high, low_open=False, high_open=False):
    def check(value):
        below = value <= low if low_open else value < low
        above = high is not None and (value >= high if high_open else value > high)
        if below or above:
            left, right = "(" if low_open else "[", ")" if high_open or high is None else "]"
            return f"must lie in {left}{low}, {'inf' if high is None else high}{right}, got {value}"
        return None
    return check


def _one_of(choices):
    return lambda value: None if value in choices else f"unknown value {value!r} (choices: {', '.join(choices)})"


def _matches(regex, what):
    return lambda value: None if regex.fullmatch(value) else f"{value!r} is not {what}"


def _device(value):
    if value in ("auto", "cpu", "cuda") or re.fullmatch(r"cuda:\d+", value):
        return None
    return f"unknown device {value!r} (auto, cpu, cuda, cuda:N)"


def _fields(value):
    if not value:
        return "expected at least one of title, text"
    if len(set(value)) != len(value) or not set(value) <= set(FIELDS):
        return f"expected distinct names among {', '.join(FIELDS)}, got {value!r}"
    return None


def _positives_rule(value):
    if isinstance(value, int):
        return None if value >= 1 else f"expected a count >= 1 or 'at least N', got {value!r}"
    match = re.fullmatch(r"\s*at least\s+(\d+)\s*", value)
    return None if match and int(match.group(1)) >= 1 else f"expected a count >= 1 or 'at least N', got {value!r}"


def _each(check):
    def each(values):
        return next((f"item {i}: {why}" for i, v in enumerate(values) if (why := check(v))), None)
    return each


def _pairs(pairs):
    for i, pair in enumerate(pairs):
        if len(pair) != 2:
            return f"item {i}: expected [baseline, candidate], got {pair!r}"
        if (why := _each(_matches(_NAME, "a run name"))(pair)) is not None:
            return f"item {i}: {why}"
    return None


def _stopwords(value):
    if value in STOPWORD_LANGUAGES or is_stopword_file(value):
        return None  # a file is read (and checked) by the tokenizer
    return (f"{value!r} is neither a stopword language ({', '.join(sorted(STOPWORD_LANGUAGES))}) nor a file; "
            "none: no stopwords")


_POSITIVE, _NON_NEGATIVE, _UNIT = _between(1, None), _between(0, None), _between(0.0, 1.0)
_MEASURE_NAME = _matches(_MEASURE, "a measure name (e.g. nDCG@10)")
# dotted key ("*" for any name under a mapping) -> check(value) -> None or why the value is wrong;
# None values (an optional key turned off) are not checked
RULES = {
    "dataset": _matches(_NAME, "a dataset name (letters, digits, _ . + -)"),
    "generate.families": _POSITIVE, "generate.confusables_per_family": _NON_NEGATIVE,
    "generate.generic_docs": _NON_NEGATIVE, "generate.queries_per_family": _POSITIVE,
    "generate.difficulty": _UNIT,
    "prepare.train": _UNIT, "prepare.val": _UNIT, "prepare.test": _UNIT,
    "prepare.val_from_train": _between(0.0, 1.0, high_open=True),
    "tokenizer.pattern": lambda value: _reason(token_pattern, value),
    "tokenizer.stopwords": _stopwords, "tokenizer.stemmer": _stemmer,
    "retrieve.depth": _POSITIVE, "retrieve.fields": _fields,
    "bm25.k1": _NON_NEGATIVE, "bm25.b": _UNIT,
    "lsa.dims": _POSITIVE, "lsa.algorithm": _one_of(LSA_ALGORITHMS),
    "dense.max_seq_length": _POSITIVE, "dense.batch_size": _POSITIVE, "dense.device": _device,
    "dense.faiss_factory": _matches(_FAISS_FACTORY, "a FAISS factory string (e.g. Flat, HNSW32, IVF256,Flat)"),
    "fusion.dense": _matches(_NAME, "a run name"),
    "fusion.depth": _POSITIVE, "fusion.tune_measure": _MEASURE_NAME,
    "fusion.methods.*.grid": lambda value: None if value else "expected at least one value",
    "mine.source": _matches(_NAME, "a run name"), "mine.count": _POSITIVE, "mine.range_min": _POSITIVE,
    "mine.range_max": _POSITIVE, "mine.margin": _between(0.0, 1.0, high_open=True),
    "train.epochs": _POSITIVE, "train.max_steps": _POSITIVE, "train.batch_size": _POSITIVE,
    "train.lr": _between(0.0, None, low_open=True), "train.schedule": _one_of(SCHEDULES),
    "train.warmup_ratio": _UNIT,
    "train.weight_decay": _NON_NEGATIVE, "train.max_grad_norm": _between(0.0, None, low_open=True),
    "train.max_seq_length": _POSITIVE, "train.positives_per_query": _positives_rule,
    "train.validate_every": _NON_NEGATIVE, "train.select": _one_of(SELECTIONS),
    "train.select_measure": _MEASURE_NAME, "train.patience": _POSITIVE,
    "train.loss": _matches(_NAME, "a loss name (the losses registry lists them)"),
    "train.variants.*.negatives": _one_of(NEGATIVES),
    "train.variants.*.temperature": _between(0.0, None, low_open=True),
    "train.variants.*.side": _one_of(SIDES), "train.variants.*.epochs": _POSITIVE,
    "evaluate.measures": _each(_MEASURE_NAME), "evaluate.diagnose_k": _POSITIVE,
    "evaluate.judged_threshold": _UNIT, "evaluate.ci_level": _between(0.0, 1.0, True, True),
    "evaluate.resamples": _POSITIVE, "evaluate.permutations": _between(1, MAX_PERMUTATIONS),
    "compare.pairs": _pairs, "compare.measure": _MEASURE_NAME,
    # numpy, scikit-learn and FAISS take 32-bit unsigned seeds
    **{f"{section}.seed": _between(0, 2**32 - 1) for section in
       ("generate", "prepare", "lsa", "dense", "mine", "train", "evaluate")},
}


def _leaves(obj, prefix: str = ""):
    """(dotted key, rule key, value) of every value below a params dataclass."""
    if dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            yield from _leaves(getattr(obj, f.name), f"{prefix}.{f.name}" if prefix else f.name)
    elif isinstance(obj, dict):
        for name, value in obj.items():
            yield f"{prefix}.{name}", f"{prefix}.*", name
            for key, _, leaf in _leaves(value, f"{prefix}.{name}"):
                yield key, key.replace(f"{prefix}.{name}.", f"{prefix}.*.", 1), leaf
    else:
        yield prefix, prefix, obj


def check_values(params: Params, source: str = "params.yaml") -> None:
    """Apply :data:`RULES`; the first wrong value is an error naming its key."""
    for key, rule_key, value in _leaves(params):
        if key != rule_key and rule_key.endswith(".*"):  # a name under a mapping: also a path part
            why = None if _NAME.fullmatch(value) else f"name {value!r} is not letters, digits, _ . + -"
        else:
            rule = RULES.get(rule_key)
            why = None if value is None or rule is None else rule(value)
        if why is not None:
            raise InputError(why, source, field=key)
    if params.mine.range_max < params.mine.range_min:
        raise InputError(f"must be >= mine.range_min ({params.mine.range_min}), got {params.mine.range_max}",
                         source, field="mine.range_max")
    _check_models(params, source)


def _check_models(params: Params, source: str) -> None:
    """dense.models: non-empty specs, run names no other retriever takes, and train.base among them."""
    taken = {"bm25", "lsa", *(f"dense-ft-{v}" for v in params.train.variants),
             *(f"fused-{m}" for m in params.fusion.methods)}  # dvc.yaml's other run names
    for name, spec in params.dense.models.items():
        if not spec.strip():
            raise InputError("expected builtin, a lock file, a model folder or hub:NAME@REVISION", source,
                             field=f"dense.models.{name}")
        if name in taken:
            raise InputError(f"run name {name!r} is another retriever's", source, field=f"dense.models.{name}")
    if params.train.base not in params.dense.models:
        raise InputError(f"{params.train.base!r} is not a model under dense.models "
                         f"(names: {', '.join(params.dense.models) or 'none'})", source, field="train.base")


def base_model(params: Params) -> tuple[str, str]:
    """The model fine-tuning starts from, which commands use when no model is named, and its setting."""
    return params.dense.models[params.train.base], f"dense.models.{params.train.base}"


# ----------------------------------------------------------------------------- checking


def _type_name(tp) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp, where: str, source: str) -> Any:
    """Check ``value`` against the annotation ``tp``; return it (dataclasses built)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [option for option in typing.get_args(tp) if option is not type(None)]
        if len(options) != 1:
            raise TypeError(f"unsupported annotation {tp} at {where}: only X | None")
        if value is None or isinstance(value, str) and value.strip().lower() == "none":
            return None  # `none` turns an optional setting off, like null
        return _coerce(value, options[0], where, source)  # its own reason, e.g. "expected a finite number"
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
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the float range
            number = math.inf
        if not math.isfinite(number):  # YAML .nan, .inf, 1.0e999: every range check would let NaN through
            raise InputError(f"expected a finite number, got {number}", source, field=where)
        return number
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"expected an integer, got {value!r}", source, field=where)
        return value
    if tp in (str, bool):
        if not isinstance(value, tp):
            raise InputError(f"expected {_type_name(tp)}, got {value!r}", source, field=where)
        return value
    raise TypeError(f"unsupported annotation {tp} at {where}")


def _required(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]


def _with_default_entries(cls, key: str, value):
    """An entry of a mapping whose items have required keys, named as a default entry, takes the keys it
    does not give from that entry: ``--set fusion.methods.rrf.value=70`` on a file without the section
    keeps rrf's default grid."""
    factory = next(f.default_factory for f in dataclasses.fields(cls) if f.name == key)
    default = factory() if factory is not dataclasses.MISSING else None
    if not (isinstance(value, dict) and isinstance(default, dict)):
        return value
    return {name: {**dataclasses.asdict(default[name]), **item}
            if isinstance(item, dict) and dataclasses.is_dataclass(default.get(name)) and
            _required(type(default[name])) else item for name, item in value.items()}


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
        kwargs[key] = _coerce(_with_default_entries(cls, key, value), hints[key], where, source)
    if missing := [name for name in _required(cls) if name not in data]:  # keys with no default (FusionMethod)
        raise InputError("missing key", source, field=f"{prefix}.{missing[0]}" if prefix else missing[0])
    return cls(**kwargs)


def params_from_dict(data: dict | None, source: str = "params.yaml") -> Params:
    if not isinstance(data or {}, dict):
        raise InputError(f"expected a mapping at the top level, got {data!r}", source)
    params = _build(Params, data or {}, "", source)
    check_values(params, source)
    return params


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key, first: int, again: int):
        self.key, self.first, self.again = key, first, again  # 1-based lines
        super().__init__(f"duplicate key {key!r} (lines {first} and {again})")


class _Loader(yaml.SafeLoader):
    """SafeLoader (no ``!!python`` tags) that refuses a mapping naming a key twice: plain YAML keeps the
    last value without a word, so a setting written twice would silently lose one of them."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` may repeat keys: that is its point
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise DuplicateKeyError(key, seen[key], line)
                seen[key] = line
            except TypeError:  # an unhashable key: SafeLoader's own error follows
                break
        return super().construct_mapping(node, deep)


def parse_yaml(text: str):
    """YAML as params take it: safe tags only, no key twice in one mapping (:class:`DuplicateKeyError`)."""
    return yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader


def parse_override(text: str) -> tuple[list[str], Any]:
    """``section.key=value`` → (["section", "key"], value).

    The value is YAML when it parses (``0.9``, ``null``, ``[title, text]``) and the raw
    string otherwise, so ``tokenizer.pattern=[a-z0-9]+`` needs no quoting.
    """
    if "=" not in text:
        raise InputError(f"override {text!r} is not of the form section.key=value", field="--set")
    key, raw = text.split("=", 1)
    if not raw.strip():
        return key.strip().split("."), None
    try:
        value = parse_yaml(raw)
    except DuplicateKeyError as exc:
        raise InputError(f"duplicate key {exc.key!r} in --set {text}", field=key.strip()) from None
    except (yaml.YAMLError, RecursionError):
        value = raw
    return key.strip().split("."), value


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
        raw = path.read_bytes()
        try:
            data = parse_yaml(raw.decode("utf-8")) or {}
        except DuplicateKeyError as exc:
            raise InputError(str(exc), str(path), exc.again) from None
        except UnicodeDecodeError as exc:
            raise InputError(f"invalid UTF-8 at byte {exc.start}", str(path),
                             raw[:exc.start].count(b"\n") + 1) from None
        except RecursionError:
            raise InputError("invalid YAML: nested too deeply", str(path)) from None
        except yaml.YAMLError as exc:
            line = getattr(getattr(exc, "problem_mark", None), "line", None)
            # the reason without PyYAML's quoted snippet, so that the error stays one line
            reason = " ".join(filter(None, (getattr(exc, "context", None), getattr(exc, "problem", None))))
            raise InputError(f"invalid YAML: {reason or exc}", str(path), None if line is None else line + 1)
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
        # the bad value is the override's, inside it, or the setting it turned into a mapping
        if where == key or where.startswith((key + ".", key + "[")) or key.startswith(where + "."):
            return InputError(f"{exc.reason} (from --set {text})", field=where)
    line = _key_line(path, where) if path.exists() and where else None
    return InputError(exc.reason, exc.path, line, exc.field)


def as_dict(obj) -> Any:
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj


def add_params_args(parser: argparse.ArgumentParser) -> None:
    """``--params`` and ``--set``, the same on every command."""
    parser.add_argument("--params", default=None,
                        help=f"params file (default: {DEFAULT_PARAMS} when present, else the built-in defaults, "
                             "which are the repository's params.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a parameter, checked against the same schema (repeatable)")


def check_paths(args: argparse.Namespace, inputs: dict, files: dict | None = None, folders: dict | None = None,
                into: dict | None = None) -> None:
    """:func:`core.atomic.check_outputs` with the params file (given, or the default one) among the inputs."""
    from .atomic import check_outputs

    params = {"--params": getattr(args, "params", None) or DEFAULT_PARAMS} if hasattr(args, "params") else {}
    check_outputs({**inputs, **params}, files, folders, into)


def params_of(args: argparse.Namespace) -> Params:
    return load_params(args.params, args.overrides)
