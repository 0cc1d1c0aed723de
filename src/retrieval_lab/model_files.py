"""Which model files a dense model is: a lock file, a Hugging Face model folder, or a hub revision.

A lock names the model, its revision, where its files come from and the sha256 of
each file; every hash is checked before any file is used. ``source`` is
``package:<module>`` (an installed package whose folder holds the files, found without
importing it: the offline default) or ``hub`` (downloaded at the pinned revision through huggingface_hub).
The base model's lock ships inside this package (``builtin``, the default of
``dense.models.dense``), so every command works from any folder.

A model is named (``dense.models.<name>``, ``--model``) by: ``builtin``; a lock file; a Hugging
Face model folder (a fine-tuned model, or any local model: its files are hashed and
recorded like a pinned revision); or ``hub:NAME@REVISION`` (downloaded at that
revision, then hashed and recorded the same way). Nothing here loads a model: :mod:`.encoder` does.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

from .core.errors import InputError
from .core.parse import json_loads

LOCK_KEYS = ("name", "revision", "source", "files")
BUILTIN = "builtin"  # the lock shipped inside the package
BUILTIN_LOCK = Path(__file__).resolve().parent / "models" / "base.lock.json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_lock(lock_path: str | Path) -> dict:
    """Parse and shape-check a lock file (no hashing)."""
    lock_path = Path(lock_path)
    if not lock_path.is_file():
        raise InputError("lock file not found", str(lock_path))
    try:
        lock = json_loads(lock_path.read_text(encoding="utf-8"), str(lock_path))
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc.msg})", str(lock_path), exc.lineno) from None
    if not isinstance(lock, dict):
        raise InputError("expected a JSON object", str(lock_path))
    for key in LOCK_KEYS:
        if key not in lock:
            raise InputError("missing field", str(lock_path), field=key)
    files = lock["files"]
    if not isinstance(files, dict) or not files:
        raise InputError("expected a non-empty mapping file name -> sha256", str(lock_path), field="files")
    for name, digest in files.items():
        if not (isinstance(digest, str) and len(digest) == 64):
            raise InputError(f"expected a 64-hex-digit sha256, got {digest!r}", str(lock_path),
                             field=f"files.{name}")
    return lock


def _lock_folder(lock: dict, lock_path: Path) -> Path:
    source = lock["source"]
    if isinstance(source, str) and source.startswith("package:"):
        return _package_folder(source.split(":", 1)[1], lock, lock_path)
    if source == "hub":
        return _hub_folder(lock["name"], lock["revision"], str(lock_path))
    raise InputError(f"unknown source {source!r} (expected 'package:<module>' or 'hub')", str(lock_path),
                     field="source")


def _package_folder(module_name: str, lock: dict, lock_path: Path) -> Path:
    """The model folder of ``package:<module>``: the folder of an installed top-level package (or one folder
    down) that holds every file the lock lists. Located with ``importlib.util.find_spec``, never imported:
    a lock cannot make us run any installed module's code. The hashes are checked after."""
    def refuse(why: str) -> InputError:
        return InputError(f"model package {module_name!r} {why}", str(lock_path), field="source")

    if not module_name.isidentifier():  # a dotted name would import its parents to be found
        raise refuse("is not a top-level package name")
    spec = importlib.util.find_spec(module_name)  # locates a top-level name without executing anything
    if spec is None:
        raise refuse("is not installed")
    roots = [Path(p).resolve() for p in spec.submodule_search_locations or []]  # none: a plain module
    held = [(sum((folder / name).is_file() for name in lock["files"]), -i, folder)
            for i, folder in enumerate(f for root in roots for f in (root, *_subfolders(root)))]
    count, _, folder = max(held, default=(0, 0, None), key=lambda x: x[:2])  # most files; the first of equals
    if not count:
        raise refuse(f"has no folder holding the model's files ({', '.join(lock['files'])}): not a model package")
    return folder  # the hash check names any file it lacks


def _subfolders(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def _hub_folder(name: str, revision: str, where: str, field: str | None = None) -> Path:
    """For users with a hub: fetch exactly ``revision`` (as AutoModel.from_pretrained(name, revision=...))."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id=name, revision=revision))
    except (OSError, ValueError) as exc:  # offline, unknown repository or revision, malformed id
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"cannot fetch {name}@{revision} from the hub: {first}", where, field=field) from None


def folder_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file below a model folder (hidden entries skipped), by relative path."""
    files = sorted(p for p in folder.rglob("*") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    return {p.relative_to(folder).as_posix(): _sha256(p) for p in files}


def _verified(lock_path: Path) -> tuple[dict, Path]:
    lock = read_lock(lock_path)
    folder = _lock_folder(lock, lock_path)
    for name, expected in lock["files"].items():
        path = folder / name
        if not path.is_file():
            raise InputError(f"model file {name} is missing from {folder} (expected sha256 {expected}, "
                             "actual: no file)", str(lock_path), field=f"files.{name}")
        actual = _sha256(path)
        if actual != expected.lower():
            raise InputError(f"model file {name} has sha256 {actual}, expected {expected}", str(lock_path),
                             field=f"files.{name}")
    return lock, folder


def verify_lock(lock_path: str | Path) -> Path:
    """Resolve the lock's model folder and check every listed file's sha256 before any use."""
    return _verified(BUILTIN_LOCK if str(lock_path) == BUILTIN else Path(lock_path))[1]


def resolve_model(model: str | Path, field: str | None = None) -> tuple[Path, dict]:
    """The verified folder of a model (see the module docstring for the four ways to name one) and how
    outputs record it; loads nothing. ``field`` names the setting that gave ``model`` in errors."""
    spec = str(model)
    if spec == BUILTIN:
        lock, folder = _verified(BUILTIN_LOCK)
        return folder, {"lock": BUILTIN, **{k: lock[k] for k in LOCK_KEYS}}
    if spec.startswith("hub:"):
        name, _, revision = spec[len("hub:"):].partition("@")
        if not name.strip() or not revision.strip():
            raise InputError("expected hub:NAME@REVISION (a commit hash pins the files; a branch moves)", spec,
                             field=field)
        folder = _hub_folder(name, revision, spec, field)
        return folder, {"hub": name, "revision": revision, "files": folder_hashes(folder)}
    path = Path(spec)
    if path.is_file():
        lock, folder = _verified(path)
        return folder, {"lock": str(path), **{k: lock[k] for k in LOCK_KEYS}}  # no absolute folder: portable
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise InputError("not a Hugging Face model folder (no config.json)", spec, field=field)
        return path, {"model_dir": str(path.resolve()), "files": folder_hashes(path)}
    raise InputError(f"model not found: expected a lock file, a Hugging Face model folder, hub:NAME@REVISION "
                     f"or {BUILTIN}", spec, field=field)


PICKLED_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.pickle")  # unpickling can run code


def check_loadable(folder: Path, where: str | None = None, field: str | None = None) -> None:
    """Refuse, before transformers is imported, a model folder whose loading could run code of its own:
    a config naming code (``auto_map``: transformers would import the folder's Python files, or ask on a
    terminal whether to), Python files, or weights only as a pickle (no model.safetensors)."""
    where = where or str(folder)
    for name in ("config.json", "tokenizer_config.json"):
        path = folder / name
        if not path.is_file():
            continue
        try:
            config = json_loads(path.read_text(encoding="utf-8"), str(path))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{name} is not JSON ({exc})", where, field=field) from None
        if not isinstance(config, dict):
            raise InputError(f"{name} is not a JSON object", where, field=field)
        if "auto_map" in config:
            raise InputError(f"{name} names the model's own code (auto_map); retrieval-lab never runs a model's code",
                             where, field=field)
    code = sorted(p.name for p in folder.glob("*.py"))
    if code:
        raise InputError(f"holds Python files ({', '.join(code)}); retrieval-lab never runs a model's code", where,
                         field=field)
    pickled = sorted(p.name for pattern in PICKLED_WEIGHTS for p in folder.glob(pattern))
    if pickled and not (folder / "model.safetensors").is_file():
        raise InputError(f"has weights only as a pickle ({', '.join(pickled)}), which can run code when loaded; "
                         "expected model.safetensors", where, field=field)
