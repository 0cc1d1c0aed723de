"""What an existing file is, for the rule every file output obeys: it replaces a file only of its own kind.

"A command replaces only what it wrote": each file output declares its kind (a command in its ``PATHS``, a
library writer in its call), and an existing file at the output is replaced only when it is of that kind,
what a previous run of the same writer left there. Anything else (a note, a script, another kind: qrels
where a pool goes, a pool where qrels go) is refused in one line naming the output, the path and what it
is, before anything is written. Two exceptions, both holding nothing to lose: an empty file, and a link
whose target is missing (a link is replaced, never what it points to; one that reaches a file is judged by
that file). A *labelled* pool (any score cell filled) is an annotator's work, never replaced by anything.

Each kind is recognised by a signature its files already carry (so the pipeline's committed outputs keep
their bytes), read from the file's first 64 KiB, except a pool's labels, which are counted over the
whole file:

* a TREC run: six columns, the fifth a number; qrels: BEIR's header or rows of 3 or 4 columns ending in an
  integer grade (the readers' own test: :func:`recognised` says what they would take a file for);
* a pool: its header, exactly :data:`POOL_COLUMNS`; judgments' provenance: :data:`PROVENANCE_COLUMNS`;
* a page (``page``, ``compare --html``): an HTML file whose style begins with :data:`PAGE_STYLE_MARK`;
* JSON written with ``indent=2``: its top-level keys (lines indented by exactly two spaces) hold the
  kind's keys (:data:`_JSON_KEYS`);
* markdown: its title line (:data:`_TITLES`); the experiments table's CSV: its header;
* binary: SQLite's header (judge's database), a PyTorch zip whose first record is ``.../data.pkl``
  (a checkpoint), a PNG whose ``Software`` text names :data:`PLOT_SOFTWARE` (table's plot);
* dvc.yaml: the generated names block's first line (:data:`NAMES_BEGIN`).

Nothing here imports the writers: they import these signatures, and tests/core/test_kinds.py checks that
every writer's output is recognised as its kind.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import InputError

# the kinds readers take as inputs (guard.library_output refuses writing over them)
CORPUS, QUERIES, QRELS, RUN, JSONL = "corpus", "queries", "qrels", "run", "jsonl"
# the kinds of file outputs (FILE_KINDS): one per thing a command or library writer writes
POOL, LABELLED_POOL, PROVENANCE, JUDGMENTS = "pool", "labelled pool", "provenance", "judgments"
PAGE, TIMING, FUSION, METRICS, DIAGNOSIS = "page", "timing", "fusion", "metrics", "diagnosis"
COMPARISON, COMPARISON_MD, CHECK_RESUME, CHECKPOINT = "comparison", "comparison markdown", "check-resume", "checkpoint"
TABLE_MD, TABLE_CSV, TABLE_PLOT, TABLE_INPUTS = "table markdown", "table csv", "table plot", "table inputs"
DVC_YAML = "dvc.yaml"

TEXT = {
    CORPUS: "a BEIR corpus file", QUERIES: "a BEIR queries file", QRELS: "a qrels file", RUN: "a TREC run",
    JSONL: "a file of BEIR JSON lines (a corpus or queries)",
    POOL: "a judging pool (retrieval-lab pool)", LABELLED_POOL: "a labelled pool",
    PROVENANCE: "a judgments' provenance file (judge --export)", JUDGMENTS: "a SQLite database (judge --db)",
    PAGE: "a comparison page (retrieval-lab page, compare --html)",
    TIMING: "a latency file (retrieve --timing)", FUSION: "a fusion report (fuse --report)",
    METRICS: "a metrics file (evaluate --metrics)", DIAGNOSIS: "a failure diagnosis (diagnose, evaluate)",
    COMPARISON: "a comparison (compare --output)", COMPARISON_MD: "a comparison table (compare --markdown)",
    CHECK_RESUME: "a resume check (check-resume --output)", CHECKPOINT: "a PyTorch checkpoint (train --checkpoint)",
    TABLE_MD: "an experiments table (table --markdown)", TABLE_CSV: "an experiments table (table --csv)",
    TABLE_PLOT: "an experiments plot (table --plot)", TABLE_INPUTS: "an experiments table's inputs (table --inputs)",
    DVC_YAML: "a dvc.yaml holding the names block (retrieval-lab names)",
}
FILE_KINDS = (RUN, QRELS, POOL, PROVENANCE, JUDGMENTS, PAGE, TIMING, FUSION, METRICS, DIAGNOSIS, COMPARISON,
              COMPARISON_MD, CHECK_RESUME, CHECKPOINT, TABLE_MD, TABLE_CSV, TABLE_PLOT, TABLE_INPUTS, DVC_YAML)

# the signatures, as the writers write them (they import these)
POOL_COLUMNS = ("query_id", "query_text", "doc_id", "title", "snippet", "best_rank", "retrievers", "score")
PROVENANCE_COLUMNS = ("query-id", "corpus-id", "score", "decided-by", "assessor", "kind", "label", "time")
TABLE_CSV_FIELDS = ("measure", "collection", "retriever", "seeds", "mean", "sd", "baseline", "difference", "low",
                    "high", "p_adjusted", "excludes_zero", "experiments")
PAGE_STYLE_MARK = "/* The comparison page's style (retrieval_lab/page.py inlines it)"  # page.css's first line
PLOT_SOFTWARE = "retrieval-lab table"  # the PNG's Software text (matplotlib writes it as a tEXt chunk)
NAMES_BEGIN = "  # BEGIN generated names"
_TITLES = {DIAGNOSIS: "# Failure diagnosis", COMPARISON_MD: "# Paired comparison on ",
           TABLE_MD: "# Retrievers across collections and seeds"}
# each JSON output's first top-level keys, as its to_json writes them
_JSON_KEYS = {
    TIMING: ("retriever", "summary", "wall_s", "seconds"),  # latency.Timing
    FUSION: ("method", "depth", "tuned"),  # fusion.FusionResult (fuse --report adds runs and qrels)
    METRICS: ("queries_evaluated", "queries_without_positive", "depth", "not_found_rank"),  # evaluation.StageResult
    DIAGNOSIS: ("k", "near_duplicate_jaccard", "summary", "queries"),  # diagnosis.Diagnosis
    COMPARISON: ("measure", "adjustment", "family_size", "pairs"),  # comparison.Comparisons
    CHECK_RESUME: ("passed", "checks", "max_abs_param_diff"),  # training.resume.check_resume
    TABLE_INPUTS: ("runs", "measures", "experiments"),  # experiments_table.gather
}
_SNIFF_BYTES = 1 << 16
_TOP_KEY = re.compile(r'  "((?:[^"\\]|\\.)*)": ')


BEIR_FILES = ("corpus.jsonl", "queries.jsonl")


def beir_folder(folder: Path) -> bool:
    """A folder the BEIR reader takes for a dataset: it holds corpus.jsonl and queries.jsonl (or their .gz)."""
    return all(any((folder / (name + gz)).is_file() for gz in ("", ".gz")) for name in BEIR_FILES)


def _head(path: Path) -> bytes:
    """The first 64 KiB of a file, gzip read through; b"" when unreadable."""
    import gzip
    import io
    import zlib

    try:
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError:
        return b""
    if head[:2] == b"\x1f\x8b":
        stream, head = gzip.GzipFile(fileobj=io.BytesIO(head)), b""
        try:
            while len(head) < _SNIFF_BYTES and (chunk := stream.read(4096)):
                head += chunk
        except (OSError, EOFError, zlib.error):
            pass  # the 64 KiB cut the stream: what came out of it is enough
    return head


def _lines(head: bytes) -> list[str]:
    return head.decode("utf-8", errors="replace").removeprefix("\ufeff").splitlines()


def _binary(head: bytes) -> str | None:
    if head.startswith(b"SQLite format 3\x00"):
        return JUDGMENTS
    if head.startswith(b"PK\x03\x04") and len(head) >= 30:
        size = int.from_bytes(head[26:28], "little")
        if head[30:30 + size].endswith(b"/data.pkl"):  # torch.save's zip: its first record
            return CHECKPOINT
    if head.startswith(b"\x89PNG\r\n\x1a\n") and b"tEXtSoftware\x00" + PLOT_SOFTWARE.encode() in head:
        return TABLE_PLOT
    return None


def _json_kind(lines: list[str]) -> str | None:
    keys = {m.group(1) for line in lines[1:] if (m := _TOP_KEY.match(line))}
    return next((kind for kind, needed in _JSON_KEYS.items() if set(needed) <= keys), None)


def recognised(path: str | os.PathLike) -> str | None:
    """The kind of the existing file at ``path``: one of :data:`TEXT`'s keys, or None (a note, a script,
    another tool's file). A pool is :data:`POOL` whether labelled or not (:func:`pool_labels` counts)."""
    path = Path(path)
    name = path.name.removesuffix(".gz")
    if name in BEIR_FILES:
        return CORPUS if name == "corpus.jsonl" else QUERIES
    if path.parent.name == "qrels" and beir_folder(path.parent.parent):
        return QRELS
    head = _head(path)
    kind = _binary(head)
    if kind is not None:
        return kind
    lines = _lines(head)
    if any(line.startswith(NAMES_BEGIN) for line in lines):
        return DVC_YAML
    line = next((line for line in lines if line.strip()), "")
    if line.lower().startswith("<!doctype html>") and f"<style>\n{PAGE_STYLE_MARK}" in "\n".join(lines[:16]):
        return PAGE
    if line == "{":
        return _json_kind(lines)
    if line.lstrip().startswith("{") and '"_id"' in line:
        return JSONL
    cells = tuple(line.rstrip("\r").split("\t"))
    if cells == POOL_COLUMNS:
        return POOL
    if cells == PROVENANCE_COLUMNS:
        return PROVENANCE
    if tuple(line.rstrip("\r").split(",")) == TABLE_CSV_FIELDS:
        return TABLE_CSV
    title = next((kind for kind, start in _TITLES.items() if line.startswith(start)), None)
    if title is not None:
        return title
    parts = line.split()
    if parts[:2] == ["query-id", "corpus-id"]:
        return QRELS
    if len(parts) in (3, 4) and parts[-1].lstrip("+-").isdigit():
        return QRELS  # BEIR rows (query, document, grade) or TREC's (query, 0, document, grade)
    if len(parts) == 6:
        try:
            float(parts[4])
        except ValueError:
            return None
        return RUN
    return None


def pool_labels(path: str | os.PathLike) -> int:
    """How many rows of the pool at ``path`` have a label in their score cell (read through the whole file)."""
    at = POOL_COLUMNS.index("score")
    count = 0
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            next(fh, None)  # the header
            for line in fh:
                cells = line.rstrip("\r\n").split("\t")
                count += len(cells) > at and bool(cells[at].strip())
    except OSError:
        return 0
    return count


def what_is(path: str | os.PathLike) -> tuple[str | None, int]:
    """(kind, labels): :func:`recognised`'s kind, :data:`LABELLED_POOL` for a pool holding labels (and how many)."""
    kind = recognised(path)
    if kind == POOL:
        labels = pool_labels(path)
        if labels:
            return LABELLED_POOL, labels
    return kind, 0


def describe(path: str | os.PathLike) -> str:
    """What the existing file at ``path`` is, in words: "a TREC run", "a labelled pool (107 labels)", ..."""
    kind, labels = what_is(path)
    if kind == LABELLED_POOL:
        return f"a labelled pool ({labels} label{'s' if labels != 1 else ''})"
    return TEXT[kind] if kind is not None else "a file retrieval-lab did not write"


def check_kind(path: str | os.PathLike, kind: str | None, field: str | None = None,
               writer: str | None = None) -> None:
    """Refuse (InputError, one line) a file output of ``kind`` at ``path`` where an existing file is of another
    kind or of none: it replaces only what a previous run of its writer wrote there. An empty file, a missing
    one or a link reaching nothing hold nothing and pass; a link reaching a file is judged by that file. An
    output of no declared kind (None) replaces no existing file at all.

    ``field``: the option (``--output``) or argument (``path``) the message names; ``writer``: who writes it
    (a command's option, a library function).
    """
    assert kind is None or kind in FILE_KINDS, kind
    target = Path(path)
    try:
        if not target.exists() or not target.is_file() or target.stat().st_size == 0:
            return  # nothing there, a link to nothing, or an empty file; folders and devices: check_replaceable
    except OSError:
        return
    found, _labels = what_is(target)
    option = field or "path"
    if found == LABELLED_POOL:
        raise InputError(f"is {describe(target)}: an annotator's work, never replaced; choose another {option}",
                         str(path), field=field)
    if found != kind or kind is None:
        who = writer or option
        writes = (f"writes {TEXT[kind]} and replaces only that (what it wrote before)" if kind is not None
                  else "declares no kind it may replace")
        raise InputError(f"is {describe(target)}; {who} {writes}; choose another {option}", str(path), field=field)
