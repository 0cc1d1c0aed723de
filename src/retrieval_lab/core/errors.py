"""One error type for bad input, so every message names file, line and field the same way."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input: the message names the file, the line (1-based) and the field where known."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None,
                 field: str | None = None):
        self.path, self.line, self.field, self.reason = path, line, field, message
        where = ""
        if path is not None:
            where = str(path) + (f":{line}" if line is not None else "")
        if field is not None:
            where += f" field '{field}'" if where else f"field '{field}'"
        super().__init__(f"{where}: {message}" if where else message)
