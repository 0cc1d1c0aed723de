"""The names dvc.yaml makes paths of, written into it from params the schema accepted.

DVC expands dvc.yaml's ``foreach`` and ``${...}`` itself, and removes a stage's outputs before the
stage's command runs (``Stage.run`` -> ``remove_outs``): a name read straight from params.yaml becomes a
path DVC deletes before any retrieval-lab code can refuse it (a ``train.variants`` key ``..`` made
``dvc repro -s 'train@..'`` remove ``models/finetuned``; ``dataset: ..`` made ``-s prepare`` remove
``data/``). So dvc.yaml reads no name from params.yaml. Its ``names`` block (a ``vars`` entry between
:data:`BEGIN` and :data:`END`) is written by ``retrieval-lab names`` from checked params, whose names
match :data:`rules.NAME` (no ``/``, never ``.`` or ``..``); the ``names`` stage reads the params those
names come from and fails, naming the difference, while the block says something else.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath

import yaml

from . import report_files
from .core.errors import InputError
from .core.kinds import NAMES_BEGIN
from .core.params import Params
from .core.parse import check_yaml_numbers

BEGIN = NAMES_BEGIN  # the block's first line: also what names --dvc-yaml recognises its file by (core.kinds)
END = "  # END generated names"
_HEAD = ("  # BEGIN generated names: written by `retrieval-lab names` from params.yaml (checked by its schema);\n"
         "  # edit params.yaml, then run it. The names stage fails while this block differs from params.yaml.\n")
# block key -> the params key it mirrors, for messages
SOURCES = {"dataset": "dataset", "dense": "dense.models", "train": "train.variants", "mine": "train.variants",
           "fusion": "fusion.methods", "external": "external", "uses": "fusion.dense, mine.source and train.base",
           "compare": "compare.pairs"}
# The compare stage's inputs follow compare.pairs: DVC can interpolate no list into a command or a deps list, so
# `names` writes the runs into the names block (a string, for --runs) and their files between these markers
COMPARE_BEGIN = "      # BEGIN generated compare inputs"
COMPARE_END = "      # END generated compare inputs"
_COMPARE_HEAD = (f"{COMPARE_BEGIN}: the files of the runs compare.pairs names, written by `retrieval-lab names`\n")
# the run names single stages read by name (fuse's dense run, mine's source, train's base): in commands and paths
USES = (("fusion", "dense"), ("mine", "source"), ("train", "base"))


@dataclass(frozen=True)
class PipelineNames:
    """What dvc.yaml's foreach groups and paths take from params: names, and the few values it uses in paths."""

    dataset: str
    dense: dict[str, str]  # run name -> its model (encode's dependency)
    train: dict[str, dict[str, str]]  # variant -> {negatives: the mined folder train reads}
    # the mine stages: each kind of negatives a variant reads, once (none without variants: a collection
    # with test judgments alone trains nothing, so nothing is mined)
    mine: list[str]
    fusion: dict[str, dict]  # method -> {} (fuse reads the method's values from params.yaml)
    external: dict[str, dict[str, str]]  # run name -> {path: retrieve-external's dependency}
    # {section: {key: run name}} of USES: DVC would put params.yaml's own value into a command unchecked
    uses: dict[str, dict[str, str]] = field(default_factory=dict)
    compare: str = ""  # the runs compare.pairs names, sorted, space-separated: compare's --runs

    @property
    def compare_runs(self) -> list[str]:
        return self.compare.split()

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"


# The files the pipeline writes beside the runs' own: a run named after one (metrics/<dataset>/<run>.json,
# reports/<dataset>/<run>/) would be written over it, or deleted with it (`dvc repro -s evaluate-external@compare`
# removed metrics/<dataset>/compare.json). Compared case-blind: on macOS's file system Compare is compare.
_PIPELINE_FILES = (report_files.COMPARE, "compare.md", "compare.html", *report_files.EVALUATE)
RESERVED = frozenset(n.lower() for f in _PIPELINE_FILES for n in (f, PurePosixPath(f).stem))
# a value dvc.yaml puts into a stage's shell command (encode's --model ${item}): a path's characters only, so
# that no shell reads a `;`, a quote or a `$(...)` in it; never an option (a leading -)
SHELL_SAFE = re.compile(r"[A-Za-z0-9_./@:+=][A-Za-z0-9_./@:+=-]*")


def _check(params: Params) -> None:
    """Refuse what dvc.yaml cannot take safely: a run name that is one of the pipeline's own files (case-blind), a name
    holding a '.' that dvc.yaml makes a params key of, a model that would be read by the shell, a path holding a DVC
    interpolation (``${...}``: every dvc command would fail). Run names differing only in case are refused by the
    schema (core/params.py: _check_models)."""
    runs = {**{name: f"dense.models.{name}" for name in params.dense.models},
            **{name: f"external.{name}" for name in params.external}}
    for name, where in runs.items():
        if name.lower() in RESERVED:
            raise InputError(f"run name {name!r} is taken by a file of the pipeline's own (metrics/<dataset>/"
                             f"{report_files.COMPARE}, reports/<dataset>/compare.md, per_query.json, ...): "
                             "choose another", field=where)
    # names dvc.yaml makes params keys of (`params: - external.${key}`): DVC reads a '.' in one as a nested key,
    # and the stage failed only after deleting its outputs
    keyed = {**runs, **{name: f"train.variants.{name}" for name in params.train.variants},
             **{name: f"fusion.methods.{name}" for name in params.fusion.methods}}
    for name, where in keyed.items():
        if "." in name:
            raise InputError(f"name {name!r} holds a '.': dvc.yaml's params key {where} would be read by DVC as "
                             "nested keys; use - or _ instead", field=where)
    for name, spec in params.dense.models.items():
        if not SHELL_SAFE.fullmatch(spec):
            raise InputError(f"{spec!r} reaches encode's shell command in dvc.yaml: a model path may hold letters, "
                             "digits and _ . / @ : + = - only, and not begin with -", field=f"dense.models.{name}")
    for name, spec in params.external.items():
        if "${" in spec.path or any(ord(c) < 0x20 for c in spec.path):
            raise InputError(f"{spec.path!r} holds a DVC interpolation (${{...}}) or a control character: dvc.yaml "
                             "would read it as one, and every dvc command fail", field=f"external.{name}.path")


def names_of(params: Params) -> PipelineNames:
    """The names of checked params, in params.yaml's order; refused (:func:`_check`) where dvc.yaml could not
    take them safely."""
    _check(params)
    return PipelineNames(
        dataset=params.dataset,
        dense=dict(params.dense.models),
        train={name: {"negatives": v.negatives} for name, v in params.train.variants.items()},
        mine=list(dict.fromkeys(v.negatives for v in params.train.variants.values())),
        fusion={name: {} for name in params.fusion.methods},
        external={name: {"path": r.path} for name, r in params.external.items()},
        uses={section: {key: getattr(getattr(params, section), key)} for section, key in USES},
        compare=" ".join(sorted({name for pair in params.compare.pairs for name in pair})),
    )


def render(names: PipelineNames) -> str:
    """The block, markers included: one ``names`` entry of dvc.yaml's ``vars`` list."""
    body = yaml.safe_dump([{"names": asdict(names)}], sort_keys=False, default_flow_style=None, width=110)
    return _HEAD + "".join(f"  {line}\n" for line in body.splitlines()) + END + "\n"


def render_compare(names: PipelineNames) -> str:
    """The compare stage's generated deps, markers included: each run's per-query results and diagnosis (its
    statistics and failure classes) and its run file (the page's rankings)."""
    runs = names.compare_runs
    lines = [f"      - reports/${{names.dataset}}/{run}/{name}\n" for name in (report_files.PER_QUERY,
                                                                             report_files.DIAGNOSIS) for run in runs]
    lines += [f"      - runs/${{names.dataset}}/{run}.trec\n" for run in runs]
    return _COMPARE_HEAD + "".join(lines) + COMPARE_END + "\n"


def _span(text: str, source: str, begin: str = BEGIN, end: str = END, optional: bool = False
          ) -> tuple[int, int] | None:
    """Line indices (0-based) of the begin and end markers; one of each, in that order (none at all: None,
    when ``optional``)."""
    lines = text.splitlines()
    begins = [i for i, line in enumerate(lines) if line.startswith(begin)]
    ends = [i for i, line in enumerate(lines) if line.rstrip() == end]
    if optional and not begins and not ends:
        return None
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise InputError(f"expected one '{begin.strip()}' line followed by one '{end.strip()}' line "
                         f"(found {len(begins)} and {len(ends)})", source)
    return begins[0], ends[0]


def declared(text: str, source: str) -> PipelineNames | None:
    """The names dvc.yaml's block holds now (None: the block is empty)."""
    begin, end = _span(text, source)
    block = "\n".join(text.splitlines()[begin + 1:end])
    try:
        check_yaml_numbers(yaml.compose(block, Loader=yaml.SafeLoader), source, begin + 2)
        data = yaml.safe_load(block)
    except yaml.YAMLError as exc:  # its problem only: PyYAML's full message spans several lines
        mark = getattr(exc, "problem_mark", None)
        line = begin + 2 + mark.line if mark is not None else begin + 1
        raise InputError(f"the names block is not YAML: {getattr(exc, 'problem', None) or 'unreadable'}", source,
                         line) from None
    if data is None:
        return None
    try:
        (entry,) = data
        return PipelineNames(**entry["names"])
    except (TypeError, ValueError, KeyError) as exc:
        raise InputError(f"the names block is not one 'names' entry of the {len(SOURCES)} keys ({exc})", source,
                         begin + 1) from None


def fill(text: str, names: PipelineNames, source: str) -> str:
    """``text`` with its names block replaced by :func:`render` of ``names`` and its compare inputs (if it has
    them) by :func:`render_compare`, in the file's own line endings (a dvc.yaml saved with CRLF keeps them)."""
    for begin_marker, end_marker, block, optional in ((BEGIN, END, render(names), False),
                                                      (COMPARE_BEGIN, COMPARE_END, render_compare(names), True)):
        span = _span(text, source, begin_marker, end_marker, optional)
        if span is None:  # a dvc.yaml without a compare stage of ours
            continue
        begin, end = span
        lines = text.splitlines(keepends=True)
        if lines and lines[0].endswith("\r\n"):
            block = block.replace("\n", "\r\n")
        text = "".join(lines[:begin]) + block + "".join(lines[end + 1:])
    return text


def differences(have: PipelineNames | None, want: PipelineNames) -> list[str]:
    """What params.yaml (``want``) says that dvc.yaml's block (``have``) does not, one phrase per key."""
    if have is None:
        return ["the names block is empty"]
    found = []
    for key, param in SOURCES.items():
        a, b = getattr(have, key), getattr(want, key)
        if a == b:
            continue
        if key == "dataset":
            found.append(f"dataset is {b!r} in params.yaml, {a!r} in dvc.yaml")
            continue
        if key == "mine":  # follows train.variants: said there, unless only the block's list was edited
            if have.train == want.train:
                found.append(f"the mine stages are {b} by train.variants' negatives, {a} in dvc.yaml")
            continue
        if key == "compare":
            found.append(f"compare.pairs names the runs {b!r}, dvc.yaml's compare stage reads {a!r}")
            continue
        if key == "uses":
            for section, name in USES:
                wanted, theirs = b.get(section, {}).get(name), a.get(section, {}).get(name)
                if wanted != theirs:
                    found.append(f"{section}.{name} is {wanted!r} in params.yaml, {theirs!r} in dvc.yaml")
            continue
        added, removed = [n for n in b if n not in a], [n for n in a if n not in b]
        changed = [n for n in b if n in a and a[n] != b[n]] if isinstance(b, dict) else []
        parts = ([f"adds {', '.join(map(repr, added))}"] if added else []) + \
                ([f"drops {', '.join(map(repr, removed))}"] if removed else []) + \
                ([f"changes {', '.join(map(repr, changed))}"] if changed else [])
        found.append(f"{param} {' and '.join(parts)}")
    return found
