"""What several commands share: argument types and formats of the loss commands."""

from __future__ import annotations

from ..core.errors import InputError


def comma_floats(text: str) -> list[float]:
    """``"2,1,0,-1"`` -> [2.0, 1.0, 0.0, -1.0] (an argparse type: a ValueError names the flag)."""
    return [float(x) for x in text.split(",")]


def comma_ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def check_columns(columns: list[int], width: int, flag: str = "--positives") -> None:
    """Refuse a column outside ``0..width-1`` (negative indices would wrap around silently)."""
    outside = [c for c in columns if not 0 <= c < width]
    if outside:
        raise InputError(f"columns {outside} outside 0..{width - 1}", field=flag)


def signed_row(values: list[float]) -> str:
    """``[+2.000000, -0.500000]``: six decimals with a sign, so columns line up across rows."""
    return "[" + ", ".join(f"{v:+.6f}" for v in values) + "]"
