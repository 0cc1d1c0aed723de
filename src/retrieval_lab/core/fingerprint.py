"""Which corpus an index or an embeddings folder was built from: the sha256 of the corpus file's bytes.

A BM25 index folder (``retrieval-lab index``) holds :data:`FILE`; an embeddings folder's
encode_report.json holds the same object under ``corpus``. Whoever reads one together with a BEIR
folder checks the two agree (:func:`check`): an index of another corpus would rank documents the
dataset does not have, or miss the ones it does, and exit 0. The file's bytes, not its parsed content,
are hashed: reading them costs a few seconds per GB, parsing them the indexing time the index saves.
Any byte changed (a document edited, added, reordered; the same corpus gzipped) asks for a new index.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .errors import InputError
from .parse import json_loads

FILE = "corpus.json"  # inside a BM25 index folder: the corpus it was built from
INDEX_AGAIN = "build it again with `retrieval-lab index`"
ENCODE_AGAIN = "encode it again with `retrieval-lab encode`"
_BLOCK = 1 << 20


def of_dataset(folder: str | Path) -> dict:
    """``{"file", "bytes", "sha256"}`` of a BEIR folder's corpus file (corpus.jsonl, or .gz when only that is)."""
    from .data import corpus_file, require_file

    path = require_file(corpus_file(folder))
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK):
            digest.update(block)
            size += len(block)
    return {"file": path.name, "bytes": size, "sha256": digest.hexdigest()}


def write(folder: str | Path, fingerprint: dict) -> None:
    """Record ``fingerprint`` in an index folder being written (the caller's atomic output)."""
    (Path(folder) / FILE).write_text(json.dumps(fingerprint, indent=2) + "\n", encoding="utf-8")


def read(folder: str | Path) -> dict | None:
    """The fingerprint an index folder records (None: it records none); a damaged file is an InputError."""
    path = Path(folder) / FILE
    if not path.exists():
        return None
    try:
        found = json_loads(path.read_text(encoding="utf-8"), str(path))
    except InputError:
        raise
    except (OSError, ValueError) as exc:
        raise InputError(f"unreadable corpus fingerprint ({type(exc).__name__})", str(path)) from None
    if not isinstance(found, dict) or not isinstance(found.get("sha256"), str):
        raise InputError("expected {\"file\", \"bytes\", \"sha256\"}", str(path), field="sha256")
    return found


def check(recorded: dict | None, dataset: str | Path, where: str, field: str, again: str) -> None:
    """Refuse, in one line naming ``where`` (the index or embeddings folder), a ``recorded`` fingerprint that is
    not the one of ``dataset``'s corpus now, or none at all (a check that cannot judge fails closed);
    ``again`` says how to build it anew."""
    if recorded is None:
        raise InputError(f"records no fingerprint of the corpus it was built from (made before they were "
                         f"recorded): {again}", where, field=field)
    current = of_dataset(dataset)
    if recorded.get("sha256") != current["sha256"]:
        raise InputError(f"was built from another corpus than {Path(dataset) / current['file']} "
                         f"({recorded.get('bytes')} bytes, sha256 {str(recorded.get('sha256'))[:12]}..., against "
                         f"{current['bytes']} bytes, {current['sha256'][:12]}...): {again}, or give the dataset it "
                         "was built from", where, field=field)
