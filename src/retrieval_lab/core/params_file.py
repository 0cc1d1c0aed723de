"""Reading params: a YAML file and ``--set`` overrides, typed against the schema, errors located.

Unknown keys and wrong types are errors; a value breaking its rule is refused by the schema
(:mod:`.params`). Every error names the file and the line of the key, or the ``--set`` that
supplied the value. ``--set section.key=value`` overrides go through the same schema, so the
command line and the pipeline cannot drift apart.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import types
import typing
from pathlib import Path
from typing import Any

import yaml

from .errors import InputError
from .params import Params, value_problem
from .parse import check_yaml_numbers
from .rules import NAME

DEFAULT_PARAMS = "params.yaml"


def _type_name(tp) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce_number(value: Any, tp, where: str, source: str) -> Any:
    # the schema's own type rule (YAML .nan, .inf, 1.0e999 are refused: every range check would let NaN through)
    if (why := value_problem(value, tp)) is not None:
        raise InputError(why, source, field=where)
    return value if tp is int else float(value)


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
        for name in value:  # a name under a mapping (a variant) is also a path part
            if not NAME.fullmatch(str(name)):
                raise InputError(f"name {str(name)!r} is not letters, digits, _ . + -", source,
                                 field=f"{where}.{name}")
        return {str(k): _coerce(v, item_tp, f"{where}.{k}", source) for k, v in value.items()}
    if tp in (int, float):
        return _coerce_number(value, tp, where, source)
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
    try:
        return cls(**kwargs)  # the schema applies each field's rule
    except InputError as exc:  # named by the section's key (train.variants.*): name it by this one
        where = prefix + exc.field[len(cls.KEY):] if cls.KEY else exc.field
        raise InputError(exc.reason, source, field=where) from None


def params_from_dict(data: dict | None, source: str = DEFAULT_PARAMS) -> Params:
    if not isinstance(data or {}, dict):
        raise InputError(f"expected a mapping at the top level, got {data!r}", source)
    return _build(Params, data or {}, "", source)


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


# YAML 1.1 (PyYAML) reads a float only with a dot, so `5e-05` would be the string '5e-05'; YAML 1.2, which DVC
# reads and writes params.yaml with, reads it as a number, and `dvc exp run -S train.lr=5e-5` writes just that
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"),
                              list("-+0123456789"))


# text -> its value, for a text parsed again in one process: each in-process load of params.yaml parses the same
# 8 KB (24 ms in PyYAML's Python parser, a copy of the value 0.2 ms), and the tests load it thousands of times.
# A text that fails is parsed again each time, so its error names each call's source.
_PARSED: dict[str, Any] = {}
_PARSED_TEXT_MAX, _PARSED_ENTRIES = 1 << 16, 256


def parse_yaml(text: str, source: str | None = None):
    """YAML as params take it: safe tags only, no key twice in one mapping (:class:`DuplicateKeyError`), no
    integer too long to convert (an :class:`InputError` naming ``source``, its line and key)."""
    if text in _PARSED:
        return copy.deepcopy(_PARSED[text])  # the caller's own value, as a parse gives
    loader = _Loader(text)  # a SafeLoader
    try:
        node = loader.get_single_node()
        check_yaml_numbers(node, source)
        value = None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()
    if len(text) <= _PARSED_TEXT_MAX and len(_PARSED) < _PARSED_ENTRIES:
        _PARSED[text] = copy.deepcopy(value)
    return value


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
    except InputError as exc:  # an integer too long to convert: named, not echoed
        raise InputError(f"{exc.reason} in --set", field=".".join(filter(None, (key.strip(), exc.field)))) from None
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


def dotted_items(data, prefix: str = "") -> dict:
    """A nested mapping as ``{"section.key": value}``, the keys ``--set`` takes (lists are values)."""
    if not isinstance(data, dict):
        return {prefix[:-1]: data}
    out = {}
    for key, value in data.items():
        out.update(dotted_items(value, f"{prefix}{key}."))
    return out


def _read_yaml(path: Path) -> dict:
    raw = path.read_bytes()
    try:
        data = parse_yaml(raw.decode("utf-8"), str(path)) or {}
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
    return data


def load_params(path: str | Path | None = None, overrides: list[str] | None = None) -> Params:
    """Read and check a params file (missing sections take their defaults).

    ``path=None`` reads ``params.yaml`` when the working folder has one and takes every
    built-in default otherwise (a command run outside a pipeline: the same values, as the
    built-in defaults equal the repository's params.yaml); a named file must exist.
    """
    if path is not None and not Path(path).is_file():
        raise InputError("params file not found", str(path))
    path = Path(DEFAULT_PARAMS if path is None else path)
    data = _read_yaml(path) if path.exists() else {}
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


_CREDENTIALS = re.compile(r"(?<=://)[^/?#\s]*@")  # the user:password@ of a URL


def _located(exc: InputError, path: Path, overrides: list[str]) -> InputError:
    """Blame the ``--set`` that supplied the bad value, else the params file's line of the key."""
    where = exc.field or ""
    for text in overrides:
        key = text.split("=", 1)[0].strip()
        # the bad value is the override's, inside it, or the setting it turned into a mapping
        if where == key or where.startswith((key + ".", key + "[")) or key.startswith(where + "."):
            shown = text.encode("unicode_escape").decode("ascii")  # a newline in the value stays on the one line
            shown = _CREDENTIALS.sub("***@", shown)  # a URL's user:password never reaches a message
            shown = shown if len(shown) <= 120 else shown[:117] + "..."  # a 5,000-digit value is not echoed whole
            return InputError(f"{exc.reason} (from --set {shown})", field=where)
    line = _key_line(path, where) if path.exists() and where else None
    return InputError(exc.reason, exc.path, line, exc.field)
