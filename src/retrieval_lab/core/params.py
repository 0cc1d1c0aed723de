"""The params schema: every parameter, its type, its built-in default and its rule, side by side.

``params.yaml`` maps onto :class:`Params`; each stage takes its own section (``params.bm25``,
``params.train`` ...). The built-in defaults below equal the repository's params.yaml, key for
key, except ``dense.models.dense`` (``builtin`` is the packaged copy of ``models/base.lock.json``);
``tests/core/test_params.py`` fails when they drift, so a command run outside the pipeline behaves as
the pipeline does. Each field declares its rule (:mod:`.rules`) with :func:`param`; a params
object checks its values when it is built, from a file (:mod:`.params_file`), a ``--set`` or in
code, so no module that receives one checks them again.

To add a setting: one field here (type, default, rule) and the same key in params.yaml.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from . import rules
from .errors import InputError
from .rules import (
    ABOVE_ZERO,
    MEASURE_NAME,
    NON_NEGATIVE,
    POSITIVE,
    RUN_NAME,
    SEED,
    UNIT,
    between,
    each,
    one_of,
)

LSA_ALGORITHMS = ("randomized", "arpack")
NEGATIVES = ("hard", "random")
SIDES = ("both", "query")
CORPUS_QUERY_KINDS = ("inverse_cloze", "title")  # training/corpus_pairs.py
SCHEDULES = ("constant", "linear", "cosine")  # training/loop.py: schedule_factor
SELECTIONS = ("best", "last")
MAX_WORKERS = 256  # bm25.workers: processes forked at once; past the machine's cores they only add memory
MAX_PERMUTATIONS = 10**7  # stats.py: each pass over the sign flips draws queries x permutations numbers


def param(default: Any = dataclasses.MISSING, rule: Callable[[Any], str | None] | None = None, *,
          factory: Callable[[], Any] | None = None) -> Any:
    """A field with its default (or ``factory`` for a list or mapping) and the rule its value obeys."""
    if factory is not None:
        return field(default_factory=factory, metadata={"rule": rule})
    return field(default=default, metadata={"rule": rule})


def value_problem(value: Any, tp: Any) -> str | None:
    """Why ``value`` is not of the annotation ``tp`` as a params file must give it, or None: an integer is no bool,
    a float a finite real number (an integer too), a list or mapping holds such items. The schema's type half,
    applied to a value from a file and to one from code alike (``rl.BM25(k1=float("nan"))``)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [option for option in typing.get_args(tp) if option is not type(None)]
        return None if value is None else value_problem(value, inner)
    if origin is list:
        if not isinstance(value, list):
            return f"expected a list, got {type(value).__name__}"
        return next((f"item {i}: {why}" for i, v in enumerate(value)
                     if (why := value_problem(v, typing.get_args(tp)[0]))), None)
    if origin is dict:
        if not isinstance(value, dict):
            return f"expected a mapping, got {type(value).__name__}"
        return next((f"{k}: {why}" for k, v in value.items() if (why := value_problem(v, typing.get_args(tp)[1]))),
                    None)
    if tp is int:  # NumPy's integers are integers; a bool is not one
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            return f"expected an integer, got {_shown(value)}"
        return None
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return f"expected a number, got {_shown(value)}"
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the float range
            number = math.inf
        return None if math.isfinite(number) else f"expected a finite number, got {number}"
    if isinstance(tp, type) and not isinstance(value, tp):
        return f"expected {'a mapping' if dataclasses.is_dataclass(tp) else tp.__name__}, got {_shown(value)}"
    return None


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 1000:
        return "an integer of over 300 digits"  # repr() of one over 4,300 digits raises
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


_HINTS: dict[type, dict[str, Any]] = {}  # a section's field types, read once


class Section:
    """A params dataclass that refuses a value breaking its field's type or rule when it is built, from a file or
    in code.

    ``KEY`` is the section's dotted key (``train.variants.*`` for a variant), set below
    :class:`Params`, so that an error names the whole key (``tokenizer.pattern``).
    """

    KEY: ClassVar[str] = ""

    def __post_init__(self) -> None:
        hints = _HINTS.get(type(self)) or _HINTS.setdefault(type(self), typing.get_type_hints(type(self)))
        for f in dataclasses.fields(self):
            rule, value = f.metadata.get("rule"), getattr(self, f.name)
            why = value_problem(value, hints[f.name])
            if why is None and rule is not None and value is not None:
                why = rule(value)
            if why is not None:
                raise InputError(why, field=f"{self.KEY}.{f.name}" if self.KEY else f.name)


@dataclass(frozen=True)
class GenerateParams(Section):
    seed: int = param(13, SEED)
    families: int = param(40, POSITIVE)  # incident families; two procedures (positives) each
    confusables_per_family: int = param(2, NON_NEGATIVE)  # same component, different incident
    generic_docs: int = param(80, NON_NEGATIVE)
    queries_per_family: int = param(5, POSITIVE)
    difficulty: float = param(0.5, UNIT)  # P(query is paraphrased) = P(query borrows a confusable's words)


@dataclass(frozen=True)
class PrepareParams(Section):
    seed: int = param(7, SEED)
    train: float = param(0.5, UNIT)
    val: float = param(0.15, UNIT)
    test: float = param(0.35, UNIT)
    # given splits without qrels/dev.tsv or val.tsv: validation carved from train
    val_from_train: float = param(0.15, between(0.0, 1.0, high_open=True))
    val_unseen: bool = True  # carve whole groups of queries sharing positives: validation measures unseen docs


@dataclass(frozen=True)
class TokenizerParams(Section):
    pattern: str = param(r"(?u)\b\w+\b", rules.token_pattern)
    lowercase: bool = True
    # a language name, a path to a word-per-line file, or null
    stopwords: str | None = param("english", rules.stopwords)
    stemmer: str | None = param("english", rules.stemmer)  # a Snowball language or null


@dataclass(frozen=True)
class RetrieveParams(Section):
    depth: int = param(100, POSITIVE)
    fields: list[str] = param(rule=rules.fields, factory=lambda: ["title", "text"])


@dataclass(frozen=True)
class BM25Params(Section):
    k1: float = param(1.2, NON_NEGATIVE)
    b: float = param(0.75, UNIT)
    workers: int = param(1, between(1, MAX_WORKERS))  # processes splitting the queries (forked); the same run
    # contiguous document shards, each indexed and searched as a task of a Dask cluster (retrievers/bm25_sharded.py);
    # 1: one index in this process. The run is the same bytes for any count
    shards: int = param(1, POSITIVE)
    # with shards > 1: the Dask scheduler's address (tcp://HOST:8786); null: a LocalCluster on this machine
    scheduler: str | None = param(None, rules.SCHEDULER)


@dataclass(frozen=True)
class LSAParams(Section):
    dims: int = param(128, POSITIVE)
    algorithm: str = param("randomized", one_of(LSA_ALGORITHMS))
    seed: int = param(0, SEED)


# The encoder runtimes' names: torch (the encoder's own forward pass, encoder.py) and one module per other runtime
# in src/retrieval_lab/runtimes, read from the folder as the fusion registry is.
ENCODER_RUNTIMES = ("torch",) + tuple(sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "runtimes")
                                             .glob("*.py") if p.stem != "__init__"))


@dataclass(frozen=True)
class DenseParams(Section):
    max_seq_length: int = param(256, POSITIVE)
    batch_size: int = param(64, POSITIVE)
    device: str = param("auto", rules.device)  # auto | cpu | cuda | cuda:N
    bf16: bool = False  # bf16 autocast for encoding (CUDA, or a CPU with AVX512-BF16/AMX); training on CUDA always
    # what runs the network when encoding: torch; openvino (the CPU only; the openvino extra): the same model
    # compiled by OpenVINO, bf16 inference precision with dense.bf16; openvino_int8: the same with int8 linear
    # layers (weights compressed without data, inputs quantised at run time); openvino_int8_static: int8
    # throughout, at scales calibrated on the embedded support corpus. Training runs on torch always
    runtime: str = param("torch", rules.one_of(ENCODER_RUNTIMES))
    # exact inner product; e.g. "IVF256,Flat" or "HNSW32" for large corpora
    faiss_factory: str = param("Flat", rules.FAISS_FACTORY)
    # search-time settings of an approximate faiss_factory, as faiss.ParameterSpace takes them ("efSearch=256" for
    # HNSW, "nprobe=64" for IVF); null: FAISS's defaults (efSearch 16, nprobe 1). A name the index lacks is refused
    faiss_search: str | None = param(None, rules.faiss_search)
    seed: int = param(0, SEED)  # FAISS training (IVF k-means) when faiss_factory is not exact
    # contiguous shards of the texts (encode) and of the documents' vectors (retrieve: one faiss_factory index each,
    # top-k merged), each a task of a Dask cluster (retrievers/dense_sharded.py); 1: everything in this process
    shards: int = param(1, POSITIVE)
    # with shards > 1: the Dask scheduler's address (tcp://HOST:8786); null: a LocalCluster on this machine
    scheduler: str | None = param(None, rules.SCHEDULER)
    # run name -> model: builtin (the lock shipped in the package), a lock file, a model folder or
    # hub:NAME@REVISION; dvc.yaml gives each its encode, retrieve and evaluate stages
    models: dict[str, str] = param(factory=lambda: {"dense": "builtin"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.runtime != "torch" and self.device.startswith("cuda"):
            raise InputError(f"dense.runtime {self.runtime} runs on the CPU, not on {self.device}: set dense.device: "
                             "cpu (or auto on a machine without CUDA)", field=f"{self.KEY}.runtime")
        for name, spec in self.models.items():
            if (why := rules.lock(spec)) is not None:
                raise InputError(why, field=f"{self.KEY}.models.{name}")


# The fusion registry's names: one module per method in src/retrieval_lab/fusion (base.py holds what they
# share). Read from the folder, not imported: core sits below the fusion package, which imports params.
FUSION_METHODS = tuple(sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "fusion").glob("*.py")
                              if p.stem not in ("__init__", "base")))


@dataclass(frozen=True)
class FusionMethod(Section):
    """A fusion method's one parameter (the method's module says what it means and which values are valid)."""
    value: float = param()  # used when fusion.tune is false or no qrels are given
    grid: list[float] = param(rule=rules.non_empty)  # the values tuning tries


@dataclass(frozen=True)
class FusionParams(Section):
    # the dense run fused with bm25 (dvc.yaml: runs/<dataset>/<dense>.trec)
    dense: str = param("dense-ft-query", RUN_NAME)
    depth: int = param(100, POSITIVE)
    tune: bool = True  # grid search on the qrels given to `fuse --qrels` (val queries); false: fixed values
    tune_measure: str = param("nDCG@10", MEASURE_NAME)
    # a name in the fusion registry (src/retrieval_lab/fusion) -> its parameter; dvc.yaml fuses once per entry
    methods: dict[str, FusionMethod] = param(factory=lambda: {
        "rrf": FusionMethod(60.0, [10.0, 20.0, 40.0, 60.0, 100.0]),
        "weighted": FusionMethod(0.5, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]),
    })

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in self.methods:
            if name not in FUSION_METHODS:
                raise InputError(f"unknown fusion method {name!r} (choices: {', '.join(FUSION_METHODS)})",
                                 field=f"{self.KEY}.methods.{name}")


@dataclass(frozen=True)
class MineParams(Section):
    seed: int = param(11, SEED)
    # the retriever whose run is mined (dvc.yaml: runs/<dataset>/<source>.trec)
    source: str = param("dense", RUN_NAME)
    count: int = param(1, POSITIVE)
    range_min: int = param(4, POSITIVE)
    range_max: int = param(13, POSITIVE)
    # keep only negatives scoring below (1 - margin) * lowest positive score
    margin: float | None = param(None, between(0.0, 1.0, high_open=True))

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.range_max < self.range_min:
            raise InputError(f"must be >= mine.range_min ({self.range_min}), got {self.range_max}",
                             field=f"{self.KEY}.range_max")


@dataclass(frozen=True)
class TrainVariant(Section):
    negatives: str = param("hard", one_of(NEGATIVES))  # which mined negatives file: hard | random
    temperature: float = param(0.05, ABOVE_ZERO)
    # both: fine-tune on batch documents; query: only the query side, every document's frozen base
    # embedding a candidate (training/loop.py: train_step)
    side: str = param("both", one_of(SIDES))
    epochs: int | None = param(None, POSITIVE)  # this variant's epochs (null: train.epochs)
    # pseudo-query pairs from this many corpus documents drawn by train.seed, mixed with the labelled
    # ones (0: none); side both only, the document side must learn the unlabelled documents
    corpus_queries: int = param(0, NON_NEGATIVE)
    # inverse_cloze: a sentence of the text -> the document without it; title: the title -> the text
    corpus_query_kind: str = param("inverse_cloze", one_of(CORPUS_QUERY_KINDS))

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.corpus_queries and self.side == "query":
            raise InputError("pseudo-query pairs need a trained document side: only with side: both",
                             field=f"{self.KEY}.corpus_queries")


@dataclass(frozen=True)
class TrainParams(Section):
    seed: int = param(42, SEED)
    epochs: int = param(2, POSITIVE)
    max_steps: int | None = param(None, POSITIVE)
    batch_size: int = param(32, POSITIVE)
    lr: float = param(2.0e-5, ABOVE_ZERO)
    # learning-rate factor after warmup: constant | linear (to 0) | cosine (to 0)
    schedule: str = param("linear", one_of(SCHEDULES))
    warmup_ratio: float = param(0.1, UNIT)
    weight_decay: float = param(0.01, NON_NEGATIVE)
    # clip the global gradient norm (sentence-transformers uses 1.0); null: off
    max_grad_norm: float | None = param(None, ABOVE_ZERO)
    max_seq_length: int = param(256, POSITIVE)
    # the forward pass under bf16 autocast on CPU (fp32 master weights and optimizer); pays off only on a CPU with
    # native bf16 (AVX512-BF16 / AMX: scripts/check_environment.py says). CUDA trains under bf16 autocast always
    bf16: bool = False
    # keep the word-embedding matrix (the input token vectors) as the base model has it: a token only unlabelled
    # documents use then keeps its place beside the tokens training moves, and AdamW updates half the weights
    freeze_word_embeddings: bool = False
    positives_per_query: int = param(2, POSITIVE)  # annotated positives every training query must have ...
    positives_at_least: bool = False  # ... at least (true) or exactly (false) that many
    validate_every: int = param(0, NON_NEGATIVE)  # steps; 0 = once per epoch
    # rank only the union of the untrained model's top N documents for the val queries (both-sides variants):
    # one encode of that union per validation instead of the corpus; null: the whole corpus (training/validation.py)
    validate_candidates: int | None = param(None, POSITIVE)
    # the weights kept: best (on the val split, step 0 = the base model included) | last
    select: str = param("best", one_of(SELECTIONS))
    select_measure: str = param("nDCG@10", MEASURE_NAME)  # what best means; one of evaluate.measures
    # stop after this many validations without improvement (null: never)
    patience: int | None = param(None, POSITIVE)
    # a later validation replaces the kept weights (and counts as an improvement for patience) only when it beats
    # them by more than this; CPU arithmetic alone moves a validation by more than 1e-5 (docs/lab-notes.md)
    select_min_delta: float = param(0.0, UNIT)
    # the trainer: retrieval-lab (training/loop.py) | sentence-transformers (SentenceTransformerTrainer with
    # MultipleNegativesRankingLoss, training/st_trainer.py; both sides, one process): training/spec.py BACKENDS
    backend: str = param("retrieval-lab", rules.matches(rules.NAME, "a trainer name (training/spec.py BACKENDS)"))
    # a name in the losses registry (src/retrieval_lab/losses)
    loss: str = param("multi_positive_nce", rules.matches(rules.NAME, "a loss name (the losses registry lists them)"))
    base: str = param("dense", RUN_NAME)  # the model fine-tuned: a name under dense.models
    variants: dict[str, TrainVariant] = param(factory=lambda: {
        "hard": TrainVariant("hard", 0.05),
        "random": TrainVariant("random", 0.05),
        "temperature": TrainVariant("hard", 0.1),
        "query": TrainVariant("hard", 0.05, side="query", epochs=10),
    })


@dataclass(frozen=True)
class EvaluateParams(Section):
    measures: list[str] = param(rule=each(MEASURE_NAME), factory=lambda: [
        "Success@1", "Success@10", "R@10", "R@100", "P@10", "RR@10", "RR", "nDCG@10",
        "AP@10", "AP@100", "Judged@10"])
    diagnose_k: int = param(10, POSITIVE)
    judged_threshold: float = param(0.1, UNIT)
    # family level of the simultaneous intervals (compare, report, compare-runs)
    ci_level: float = param(0.95, between(0.0, 1.0, True, True))
    permutations: int = param(10000, between(1, MAX_PERMUTATIONS))  # random sign flips of the paired test
    seed: int = param(5, SEED)


@dataclass(frozen=True)
class CompareParams(Section):
    pairs: list[list[str]] = param(rule=rules.pairs, factory=lambda: [
        ["dense", "dense-ft-hard"], ["dense", "dense-ft-query"], ["dense-ft-hard", "dense-ft-query"],
        ["bm25", "dense"], ["dense-ft-query", "fused-rrf"], ["bm25", "fused-rrf"],
        ["dense-ft-query", "fused-weighted"], ["bm25", "fused-weighted"]])
    measure: str = param("nDCG@10", MEASURE_NAME)
    key_measures: list[str] = param(rule=each(MEASURE_NAME), factory=lambda: ["R@100", "RR@10"])  # beside measure


@dataclass(frozen=True)
class GateParams(Section):
    """``retrieval-lab report --fail-on-regression``: the family of comparisons the gate decides on is the
    gated retrievers x the gated measures, declared here, so that adding a retriever (or a copy of one)
    never widens the gated ones' intervals by accident (docs/review-gate.md)."""
    # run names gated (each must have results at both revisions); null: every retriever either revision has.
    # The others are reported in a family of their own, never gated
    retrievers: list[str] | None = param(None, rules.some(RUN_NAME, "a retriever (null: every one)"))
    # null: compare.measure and compare.key_measures
    measures: list[str] | None = param(None, rules.some(MEASURE_NAME, "a measure (null: the key measures)"))


_HOST = re.compile(r"[A-Za-z0-9.:-]+")


@dataclass(frozen=True)
class JudgeParams(Section):
    """``retrieval-lab judge`` (retrieval_lab/judging): the browser app for labelling a pool."""
    min_label: int = param(0, between(0, 9))  # the smallest label: one key each on the page, 0-9
    max_label: int = param(2, between(0, 9))  # the largest (pool --merge takes 0..2 by default too)
    overlap: float = param(1.0, UNIT)  # share of the queries every assessor judges when --assessors assigns them
    seed: int = param(17, SEED)  # which queries are shared when --assessors assigns them
    host: str = param("127.0.0.1", rules.matches(_HOST, "an IP address or a host name"))  # loopback only
    port: int = param(0, between(0, 65535))  # 0: a free port, printed with the page's address
    measure: str | None = param(None, MEASURE_NAME)  # the key measure of --base against --head (null: compare.measure)
    # ranks of each run whose unjudged documents are weighed, for a measure without a cutoff (else its cutoff)
    depth: int = param(10, POSITIVE)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.min_label > self.max_label:
            raise InputError(f"min_label {self.min_label} is above max_label {self.max_label}", field="judge.max_label")


_CALLABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class ExternalRetriever(Section):
    """One of the user's own retrievers (retrievers/external.py; docs/own-retriever.md): a Python callable
    or an HTTP endpoint, called for every query; dvc.yaml gives each its retrieve and evaluate stages."""
    # the folder (or file) that defines it: the callable's module is imported from here; in the pipeline a
    # dependency, so editing anything in it (module, config, index) reruns this retriever's stages only
    path: str = param(rule=lambda value: None if value.strip() else "expected a path")
    callable: str | None = param(None, rules.matches(_CALLABLE, "module:function (e.g. my_search:search)"))
    url: str | None = param(None, rules.http_url)  # POST {"k", "queries": [{"id", "text"}]} (docs/own-retriever.md)
    k: int | None = param(None, POSITIVE)  # documents asked per query (null: retrieve.depth)
    batch_size: int = param(1, POSITIVE)  # queries per call
    concurrency: int = param(1, POSITIVE)  # calls in flight at once (threads)
    timeout: float = param(30.0, ABOVE_ZERO)  # seconds a call (an HTTP attempt) may take
    retries: int = param(2, NON_NEGATIVE)  # HTTP: further attempts after a timeout, a connection error or 5xx/429
    backoff: float = param(0.5, NON_NEGATIVE)  # HTTP: seconds before the first retry, doubled each time
    max_failed: float = param(0.0, UNIT)  # share of queries that may fail (named in timing.json) with a run written
    # HTTP: the environment variable holding a bearer token (its value never written, never sent elsewhere)
    token_env: str | None = param(None, rules.matches(_ENV_NAME, "an environment variable name"))

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.callable is None) == (self.url is None):
            raise InputError("give exactly one of callable (module:function) and url", field=f"{self.KEY}.callable")
        if self.token_env is not None and self.url is None:
            raise InputError("a token is sent to an endpoint only: give url", field=f"{self.KEY}.token_env")


@dataclass(frozen=True)
class Params(Section):
    dataset: str = param("support", rules.matches(rules.NAME, "a dataset name (letters, digits, _ . + -)"))
    generate: GenerateParams = param(factory=GenerateParams)
    prepare: PrepareParams = param(factory=PrepareParams)
    tokenizer: TokenizerParams = param(factory=TokenizerParams)
    retrieve: RetrieveParams = param(factory=RetrieveParams)
    bm25: BM25Params = param(factory=BM25Params)
    lsa: LSAParams = param(factory=LSAParams)
    dense: DenseParams = param(factory=DenseParams)
    fusion: FusionParams = param(factory=FusionParams)
    mine: MineParams = param(factory=MineParams)
    train: TrainParams = param(factory=TrainParams)
    evaluate: EvaluateParams = param(factory=EvaluateParams)
    compare: CompareParams = param(factory=CompareParams)
    gate: GateParams = param(factory=GateParams)
    judge: JudgeParams = param(factory=JudgeParams)
    # your own retrievers: run name -> how to call it (none by default; docs/own-retriever.md)
    external: dict[str, ExternalRetriever] = param(factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_models(self)


for _section in dataclasses.fields(Params):  # each section's dotted key, for its errors
    _cls = typing.get_type_hints(Params)[_section.name]
    if dataclasses.is_dataclass(_cls):
        _cls.KEY = _section.name
TrainVariant.KEY = "train.variants.*"
FusionMethod.KEY = "fusion.methods.*"
ExternalRetriever.KEY = "external.*"


def _check_models(params: Params) -> None:
    """Run names no two retrievers share, compared case-blind (runs/<dataset>/BM25.trec is bm25.trec on macOS's
    and Windows' file systems), and train.base among dense.models."""
    # dvc.yaml's run names, each with the key that makes it: the built-in ones first, then dense.models, external
    runs = [("bm25", None), ("lsa", None), *((f"dense-ft-{v}", f"train.variants.{v}") for v in params.train.variants),
            *((f"fused-{m}", f"fusion.methods.{m}") for m in params.fusion.methods),
            *((name, f"dense.models.{name}") for name in params.dense.models),
            *((name, f"external.{name}") for name in params.external)]
    seen: dict[str, str] = {}  # the name lowercased -> the name as given first
    for name, where in runs:
        if (other := seen.get(name.lower())) is not None:
            raise InputError(f"run name {name!r} is another retriever's" + ("" if other == name else
                             f" ({other!r}: names differing only in case are one file on macOS and Windows)"),
                             field=where)
        seen[name.lower()] = name
    if params.train.base not in params.dense.models:
        raise InputError(f"{params.train.base!r} is not a model under dense.models "
                         f"(names: {', '.join(params.dense.models) or 'none'})", field="train.base")


def base_model(params: Params) -> tuple[str, str]:
    """The model fine-tuning starts from, which commands use when no model is named, and its setting."""
    return params.dense.models[params.train.base], f"dense.models.{params.train.base}"


def as_dict(obj) -> Any:
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj
