"""docs/parameters.md, generated from the params schema, params.yaml and dvc.yaml so it cannot drift.

    python -m retrieval_lab.publishing.params_reference [--check]

For every key of :class:`retrieval_lab.core.params.Params` (a mapping's entries one by one, as
params.yaml lists them): its type, its value in params.yaml (the built-in default where the file
leaves it out), its rule (from the rule the field declares), what the schema's comment says about it,
and the stages of dvc.yaml that list it, or a section above it, under ``params:``.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import io
import json
import re
import sys
import tokenize
import types
import typing
from pathlib import Path

from retrieval_lab.core import params as schema
from retrieval_lab.core.atomic import write_text
from retrieval_lab.pipeline_names import SOURCES
from retrieval_lab.publishing import REPO

PAGE = Path("docs") / "parameters.md"
_MISSING = object()
# dvc.yaml's names block (``${names.dataset}``) -> the params.yaml key `retrieval-lab names` wrote it from
_NAMES_SOURCE = {f"names.{key}": param for key, param in SOURCES.items()}


# ----------------------------------------------------------------------------- describing a field


def type_name(hint) -> str:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " | ".join("null" if a is type(None) else type_name(a) for a in typing.get_args(hint))
    if origin is not None:
        return f"{origin.__name__}[{', '.join(type_name(a) for a in typing.get_args(hint))}]"
    return getattr(hint, "__name__", str(hint))


def rule_text(rule) -> str:
    """What a rule of :mod:`retrieval_lab.core.rules` accepts, read from the rule itself."""
    if rule is None:
        return ""
    closure = dict(zip(rule.__code__.co_freevars, (c.cell_contents for c in rule.__closure__ or ())))
    kind = rule.__qualname__.split(".<locals>")[0]
    if kind == "between":
        low, high, low_open, high_open = (closure[k] for k in ("low", "high", "low_open", "high_open"))
        left, right = "(" if low_open else "[", ")" if high_open or high is None else "]"
        return f"in {left}{low}, {'inf' if high is None else high}{right}"
    if kind == "one_of":
        return "one of " + ", ".join(f"`{c}`" for c in closure["choices"])
    if kind == "matches":
        return closure["what"]
    if kind == "each":
        return "each item " + rule_text(closure["check"])
    if kind == "some":
        return "at least one item, each " + rule_text(closure["check"])
    doc = inspect.getdoc(rule)
    if not doc:
        raise ValueError(f"rule {rule.__qualname__} has no docstring to describe it")
    return re.sub(r"^``[^`]+``: ", "", doc.splitlines()[0]).rstrip(".")


def field_comments(cls) -> dict[str, str]:
    """field -> the comment on its line and the comment lines right above it, in the schema's source."""
    source = inspect.getsource(cls)
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    lines = source.splitlines()
    found = {}
    for number, line in enumerate(lines, 1):
        m = re.match(r"\s+(\w+): [^=]+(=|$)", line)
        if not m or m.group(1) not in {f.name for f in dataclasses.fields(cls)}:
            continue
        above, k = [], number - 1
        while k >= 1 and lines[k - 1].strip().startswith("#"):
            above.insert(0, comments[k])
            k -= 1
        found[m.group(1)] = " ".join([*above, *([comments[number]] if number in comments else [])])
    return found


def _value(value) -> str:
    return "`" + (json.dumps(value) if not isinstance(value, str) else value) + "`"


# ----------------------------------------------------------------------------- which stages read a key


def _stage_params(dvc: dict, params: dict) -> dict[str, list[str]]:
    """Each stage of dvc.yaml (``name@key`` for a foreach) -> the params keys it lists, ``${key}`` resolved."""
    variables = {k: v for d in dvc.get("vars", []) if isinstance(d, dict) for k, v in d.items()}
    out: dict[str, list[str]] = {}
    for name, stage in dvc["stages"].items():
        if "foreach" not in stage:
            items, body = [(None, None)], stage
        else:
            over = stage["foreach"]
            if isinstance(over, str):
                path = re.fullmatch(r"\$\{(.+)\}", over).group(1)
                over = _lookup(variables, path) if path.split(".")[0] in variables else _lookup(params, path)
            items = list(over.items()) if isinstance(over, dict) else [(i, i) for i in over]
            body = stage["do"]
        for key, item in items:
            # a value interpolated from params.yaml (``${mine.source}`` in a path) is a params dependency too, and
            # so is one of the names block (``${names.dataset}``: params.yaml's dataset, written there by `names`)
            used = set(re.findall(r"\$\{([^}]+)\}", json.dumps({k: v for k, v in body.items() if k != "params"})))
            used = {_NAMES_SOURCE.get(k, k) for k in used}
            keys = [k for k in sorted(used - {"key", "item"}) if k.split(".")[0] in params]
            for entry in body.get("params", []):
                for k in (entry.get("params.yaml", []) if isinstance(entry, dict) else [entry]):
                    keys.append(str(k).replace("${key}", str(key)).replace("${item}", str(item)))
            out[name if key is None else f"{name}@{key}"] = keys
    return out


def _lookup(tree, dotted: str):
    for part in dotted.split("."):
        tree = tree[part]
    return tree


def readers(key: str, stage_params: dict[str, list[str]]) -> list[str]:
    return [stage for stage, keys in stage_params.items()
            if any(key == k or key.startswith(k + ".") for k in keys)]


# ----------------------------------------------------------------------------- the page


def _rows(cls, prefix: str, built, file_values, stage_params, only: set[str] | None = None) -> list[list[str]]:
    hints, comments = typing.get_type_hints(cls), field_comments(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if only is not None and f.name not in only:
            continue
        key, hint = f"{prefix}{f.name}", hints[f.name]
        value = file_values.get(f.name, _MISSING) if isinstance(file_values, dict) else _MISSING
        entry_cls = typing.get_args(hint)[1] if typing.get_origin(hint) is dict else None
        if dataclasses.is_dataclass(entry_cls):  # a mapping of sections: one group of rows per entry
            entries = value if isinstance(value, dict) else {n: None for n in getattr(built, f.name)}
            for name in entries:
                rows += _rows(entry_cls, f"{key}.{name}.", getattr(built, f.name).get(name),
                              entries[name] or {}, stage_params)
            continue
        shown = _value(value) if value is not _MISSING else _value(getattr(built, f.name)) + " (built-in)"
        if typing.get_origin(hint) is dict and isinstance(value, dict):  # dense.models: one row per entry
            for name, item in value.items():
                rows.append([f"`{key}.{name}`", type_name(typing.get_args(hint)[1]), _value(item),
                             rule_text(f.metadata.get("rule")), comments.get(f.name, ""),
                             ", ".join(f"`{s}`" for s in readers(f"{key}.{name}", stage_params)) or "-"])
            continue
        rows.append([f"`{key}`", type_name(hint), shown, rule_text(f.metadata.get("rule")),
                     comments.get(f.name, ""), ", ".join(f"`{s}`" for s in readers(key, stage_params)) or "-"])
    return rows


def render(repo: Path = REPO) -> str:
    from retrieval_lab.core.params_file import load_params, parse_yaml

    built = load_params(repo / "params.yaml")  # first: a bad params.yaml is one line naming its key
    file_values = parse_yaml((repo / "params.yaml").read_text(encoding="utf-8"), str(repo / "params.yaml"))
    stage_params = _stage_params(parse_yaml((repo / "dvc.yaml").read_text(encoding="utf-8"), str(repo / "dvc.yaml")),
                                 file_values)
    lines = ["# Parameters", "",
             ("<!-- generated by `python -m retrieval_lab.publishing.params_reference` from "
             "src/retrieval_lab/core/params.py, params.yaml and dvc.yaml: do not edit -->"), "",
             ("Every key of `params.yaml`, read in one typed place (`src/retrieval_lab/core/params.py`). "
             "**value**: the repository's `params.yaml` (the built-in default where the file leaves the key out; "
             "outside the repository the built-in defaults equal the file key for key). **rule**: what the value "
             "must be beyond its type, checked before any work; `null` turns an optional setting off. "
             "**read by**: the `dvc.yaml` stages that list the key, or a section above it, under `params:` (a "
             "change reruns exactly those and what follows). Override any key with `--set key=value` on a "
             "command, or `-S key=value` on `dvc exp run`.")]
    hints = typing.get_type_hints(schema.Params)
    top = [f for f in dataclasses.fields(schema.Params) if not dataclasses.is_dataclass(hints[f.name])]
    header = ["key", "type", "value", "rule", "what it is", "read by"]
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    sections = [("top level", None, top)] + [(f.name, hints[f.name], None) for f in dataclasses.fields(schema.Params)
                                             if dataclasses.is_dataclass(hints[f.name])]
    for title, cls, fields in sections:
        if cls is None:
            rows = _rows(schema.Params, "", built, file_values, stage_params, {f.name for f in fields})
        else:
            rows = _rows(cls, f"{title}.", getattr(built, title), file_values.get(title, {}), stage_params)
        lines += ["", f"## `{title}`" if cls is not None else "## Top level", "", *table,
                  *("| " + " | ".join(cell.replace("\n", " ").replace("|", "\\|") for cell in row) + " |" for row in rows)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when the page differs")
    args = parser.parse_args(argv)
    page, text = REPO / PAGE, render(REPO)
    if args.check:
        if not page.exists() or page.read_text(encoding="utf-8") != text:
            print(f"{page}: differs from what the params schema gives "
                  "(run python -m retrieval_lab.publishing.params_reference)", file=sys.stderr)
            return 1
        return 0
    write_text(page, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
