"""JSON and YAML as every reader takes them: a number too long to convert is bad input at its line and field.

Python refuses to turn a decimal string of more than 4,300 digits into an ``int`` (a guard against quadratic
conversion time), so ``json.loads`` and PyYAML raised a bare ``ValueError`` from deep inside a reader, a
traceback in every command. No such integer is a count, a grade or a finite score (a double ends at 309
digits), so it is refused here, where the file, the line and the key are still known. Every reader of a
JSON or YAML input goes through :func:`json_loads` or :func:`check_yaml_numbers`.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from .errors import InputError

LONGEST_INTEGER = 4300  # digits: CPython's default int_max_str_digits (sys.int_info.default_max_str_digits)


class _Long:
    """Stands in for an integer too long to convert while the parse finishes, so its key can be named."""

    def __init__(self, digits: str):
        self.digits = digits


def _decimal_digits(text: str) -> int:
    """About how many decimal digits the integer literal ``text`` has (YAML also writes 0x, 0o and 0b ones)."""
    text = text.replace("_", "").lstrip("+-")
    base = {"0x": 16, "0o": 8, "0b": 2}.get(text[:2].lower())
    if base is None:
        return len(text)
    return math.ceil((len(text) - 2) * math.log10(base))


def _too_long(digits: str) -> bool:
    return _decimal_digits(digits) > LONGEST_INTEGER


def _reason(digits: str) -> str:
    return (f"an integer of {_decimal_digits(digits)} digits (more than {LONGEST_INTEGER}, the most a reader "
            "converts)")


def _path_to(obj: Any, target: object) -> str | None:
    """The dotted path (``a.b[2].c``) of ``target`` inside parsed JSON, without recursion (any depth)."""
    stack = [(obj, "")]
    while stack:
        node, where = stack.pop()
        if node is target:
            return where
        if isinstance(node, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(node))))
    return None


def _line_of(text: str | bytes, digits: str) -> int:
    needle = digits.encode() if isinstance(text, (bytes, bytearray)) else digits
    at = text.find(needle)
    return 1 if at < 0 else text.count(b"\n" if isinstance(text, (bytes, bytearray)) else "\n", 0, at) + 1


def json_loads(text: str | bytes, source: str | None = None, line: int | None = None, prefix: str = "",
               **kwargs) -> Any:
    """``json.loads(text, **kwargs)``; an integer over :data:`LONGEST_INTEGER` digits is an :class:`InputError`
    naming ``source``, the line (``line`` for one line of a JSONL file, else the number's own) and its key
    (below ``prefix``), and a document nested past the recursion limit one naming ``source`` and ``line``."""
    longs: list[_Long] = []

    def parse_int(digits: str):
        if _too_long(digits):
            longs.append(_Long(digits))
            return longs[-1]
        return int(digits)

    try:
        obj = json.loads(text, parse_int=parse_int, **kwargs)
    except RecursionError:  # the C parser's depth is bounded by the recursion limit
        raise InputError(f"malformed JSON (nested deeper than {sys.getrecursionlimit()} levels)", source,
                         line) from None
    if longs:
        where = _path_to(obj, longs[0])
        field = ".".join(p for p in (prefix, where) if p) or None
        raise InputError(_reason(longs[0].digits), source, line if line is not None else
                         _line_of(text, longs[0].digits), field)
    return obj


def check_yaml_numbers(node, source: str | None = None, first_line: int = 1) -> None:
    """Refuse, as :func:`json_loads` does, an integer over :data:`LONGEST_INTEGER` digits in a composed YAML
    document (``node``: ``yaml.compose``'s), naming its key and line (``first_line``: the line the text starts on
    in ``source``). Aliases may make the graph cyclic: each node is seen once."""
    import yaml

    stack, seen = [(node, "")], set()
    while stack:
        current, where = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, yaml.MappingNode):
            for key, value in reversed(current.value):
                name = f"{where}.{getattr(key, 'value', '')}" if where else str(getattr(key, "value", ""))
                stack.extend(((value, name), (key, name)))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend((value, f"{where}[{i}]") for i, value in reversed(list(enumerate(current.value))))
        elif current.tag == "tag:yaml.org,2002:int" and _too_long(current.value):
            raise InputError(_reason(current.value), source,
                             current.start_mark.line + first_line, where or None)
