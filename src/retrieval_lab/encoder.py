"""The dense encoder: mean-pooled, L2-normalised embeddings of a model that :mod:`.model_files` resolved.

Embeddings are mean-pooled last hidden states (padding excluded), L2-normalised, so
the inner product is the cosine. :func:`encode_dataset` writes the "embeddings
folder" every dense consumer reads (:func:`load_embeddings`).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .core.atomic import atomic_path, write_json
from .core.data import require_file
from .core.errors import InputError
from .core.params import DenseParams
from .core.parse import json_loads
from .model_files import check_loadable, resolve_model

if TYPE_CHECKING:
    import torch
# torch itself is imported where the network runs: reading and writing an embeddings folder (every dense
# retrieve) then costs no torch import, about 1.2 s of CPU a process.

DOC_EMBEDDINGS, DOC_IDS = "doc_embeddings.npy", "doc_ids.txt"
QUERY_EMBEDDINGS, QUERY_IDS = "query_embeddings.npy", "query_ids.txt"
REPORT = "encode_report.json"


# ----------------------------------------------------------------------------- the encoder


TRAIN_CHUNK = 32  # texts per forward pass in training, grouped by token length


def _mean_pool(last_hidden, mask):
    mask = mask.unsqueeze(-1).to(last_hidden.dtype)  # [B, T, 1]
    summed = (last_hidden * mask).sum(dim=1)  # [B, H]
    counts = mask.sum(dim=1).clamp(min=1e-9)  # [B, 1]
    return summed / counts  # [B, H]


def native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX): then ``dense.bf16`` is faster, not slower."""
    import torch

    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def require_native_bf16(device: torch.device, field: str) -> None:
    """bf16 on a CPU without native bf16 is emulated: measured on a Zen 3 (AVX2 only), encoding 7x and training
    11x slower than fp32 (lab notes, 2026-12-06). Refused in one line, before any work, instead of hours."""
    if device.type == "cpu" and not native_bf16():
        raise InputError(f"{field}: this CPU has no AVX512-BF16 or AMX, so bf16 would be emulated, several times "
                         f"slower than fp32: set {field}=false (scripts/check_environment.py says which CPUs have it)",
                         field=field)


def resolve_device(device: str = "auto") -> torch.device:
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError("CUDA requested but not available", field="dense.device")
    return torch.device(device)


class Encoder:
    """A Hugging Face encoder with mean pooling and L2 normalisation.

    ``embed`` keeps the graph (training); ``encode`` is inference, batch by batch.
    ``source`` describes where the weights came from (lock and hashes, or folder).
    """

    def __init__(self, model, tokenizer, device, source: dict):
        self.model, self.tokenizer, self.device, self.source = model, tokenizer, device, source
        self.last_truncated = 0  # texts cut at max_length by the latest encode()
        self._compiled: dict[tuple, object] = {}  # (runtime, bf16, threads, weights' versions) -> compiled network

    @property
    def dim(self) -> int:
        # training may wrap the model (DistributedDataParallel keeps it as .module)
        return int(getattr(self.model, "module", self.model).config.hidden_size)

    def check_max_length(self, max_length: int, field: str) -> None:
        """Refuse a token limit beyond the model's position embeddings (its forward pass would fail on a
        long text, deep into the work)."""
        config = getattr(self.model, "module", self.model).config
        limit = getattr(config, "max_position_embeddings", None)
        if limit is not None and max_length > limit:
            name = self.source.get("name") or self.source.get("hub") or self.source.get("model_dir") or "the model"
            raise InputError(f"{max_length} tokens exceed the maximum of {name}: {limit} "
                             "(max_position_embeddings)", field=field)

    def _tokenize(self, texts: list[str], max_length: int):
        batch = self.tokenizer(list(texts), padding=True, truncation=True, max_length=max_length,
                               return_tensors="pt")
        # The fast tokenizer keeps what truncation cut off in `overflowing`.
        truncated = sum(1 for enc in batch.encodings if enc.overflowing)
        return batch.to(self.device), truncated

    def _forward(self, batch):
        import torch

        out = self.model(**batch).last_hidden_state  # [B, T, H]
        pooled = _mean_pool(out.float(), batch["attention_mask"])  # [B, H]
        return torch.nn.functional.normalize(pooled, p=2, dim=-1)  # [B, H], unit rows

    def embed(self, texts: list[str], max_length: int, chunk: int = TRAIN_CHUNK):
        """Embeddings ``[len(texts), H]`` with gradients (training).

        e = u / |u|,  u = sum_t m_t h_t / sum_t m_t, with h_t the last hidden state of
        token t and m_t the attention mask (1 for tokens, 0 for padding), so padding
        changes neither the sum nor the count. Texts run through the model in chunks of
        ``chunk`` of similar token length (0: all at once): each chunk pads only to its own
        longest text, so a batch of short and long texts costs far less, with the same
        embeddings up to float rounding.
        """
        import torch

        self.check_max_length(max_length, "train.max_seq_length")
        if not chunk or len(texts) <= chunk:
            batch, _ = self._tokenize(texts, max_length)
            return self._forward(batch)
        lengths = [len(ids) for ids in self.tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]]
        order = sorted(range(len(texts)), key=lambda i: (lengths[i], i))
        parts = []
        for start in range(0, len(order), chunk):
            batch, _ = self._tokenize([texts[i] for i in order[start:start + chunk]], max_length)
            parts.append(self._forward(batch))  # [c, H]
        by_length = torch.cat(parts)  # [n, H], rows in `order`
        inverse = torch.empty(len(order), dtype=torch.long, device=by_length.device)
        inverse[torch.tensor(order, device=by_length.device)] = torch.arange(len(order), device=by_length.device)
        return by_length[inverse]  # [n, H], rows in input order

    def encode(self, texts: list[str], batch_size: int = 64, max_length: int = 256,
               bf16: bool = False, runtime: str = "torch") -> np.ndarray:
        """Inference embeddings ``float32 [len(texts), H]`` in input order.

        Texts are batched longest first (by characters) so each batch pads little; the
        number cut at ``max_length`` tokens is stored in ``last_truncated``. ``runtime``: what runs the network
        (``dense.runtime``): torch here, or a runtime of :mod:`retrieval_lab.runtimes`, compiled on first use and
        again whenever the weights have changed since.
        """
        import torch

        self.check_max_length(max_length, "dense.max_seq_length")
        texts = list(texts)
        if runtime != "torch":
            rows, self.last_truncated = self._compiled_by(runtime, bf16).encode(texts, batch_size, max_length)
            return rows
        if bf16:
            require_native_bf16(self.device, "dense.bf16")
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        truncated = 0
        was_training = self.model.training
        self.model.eval()  # no dropout
        # On CPU bf16 pays off only with native bf16 units (AVX512-BF16 / AMX); elsewhere it is emulated.
        autocast = torch.autocast(self.device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        try:
            with torch.inference_mode(), autocast:
                for start in range(0, len(texts), batch_size):
                    idx = order[start:start + batch_size]
                    batch, cut = self._tokenize([texts[i] for i in idx], max_length)
                    truncated += cut
                    out[idx] = self._forward(batch).float().cpu().numpy()  # [b, H]
        finally:
            self.model.train(was_training)
        self.last_truncated = truncated
        return out

    def _compiled_by(self, runtime: str, bf16: bool):
        import torch

        from .runtimes import compiled

        if bf16 and not native_bf16():  # a compiler would quietly keep f32: the report would say bf16 wrongly
            raise InputError(f"dense.bf16 with dense.runtime {runtime} needs a CPU with AVX512-BF16 or AMX "
                             "(scripts/check_environment.py says which this one has)", field="dense.bf16")
        model = getattr(self.model, "module", self.model)
        # torch counts in-place changes of each tensor: a step of training since the last compile recompiles
        key = (runtime, bf16, torch.get_num_threads(), tuple(p._version for p in model.parameters()))
        if key not in self._compiled:
            self._compiled = {key: compiled(runtime, self, bf16, torch.get_num_threads())}
        return self._compiled[key]

    def save(self, directory: str | Path, reports: dict[str, dict] | None = None) -> None:
        """Save model and tokenizer in Hugging Face format, plus ``reports`` (file name -> JSON object,
        e.g. training.json), renamed into place together."""
        with atomic_path(directory, is_dir=True) as tmp:
            self.model.save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)
            for name, report in (reports or {}).items():
                write_json(tmp / name, report)


def load(model: str | Path, device: str = "auto", field: str | None = None) -> Encoder:
    """Load a model named as :func:`resolve_model` takes it, every file verified or hashed first, nothing
    of the model's own run: no remote code (never a prompt), safetensors weights only."""
    folder, source = resolve_model(model, field)
    check_loadable(folder, str(model), field)  # before transformers is even imported
    from transformers import AutoModel, AutoTokenizer

    torch_device = resolve_device(device)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
        if not getattr(tokenizer, "is_fast", False):
            raise InputError("a fast (Rust) tokenizer is required (tokenizer.json)", str(folder))
        net = AutoModel.from_pretrained(folder, trust_remote_code=False, use_safetensors=True)
    except (ValueError, KeyError, OSError) as exc:  # an unknown model_type, a missing or unreadable file
        if isinstance(exc, InputError):
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"cannot load the model: {first}", str(model), field=field) from None
    net = net.to(torch_device)
    net.eval()
    return Encoder(net, tokenizer, torch_device, source)


# ----------------------------------------------------------------------------- embeddings folder


@dataclass
class Embeddings:
    doc_ids: list[str]
    doc_embeddings: np.ndarray  # [n_docs, H] float32, unit rows
    query_ids: list[str]
    query_embeddings: np.ndarray  # [n_queries, H] float32, unit rows
    report: dict = field(default_factory=dict)  # written: depends only on the inputs
    timings: dict = field(default_factory=dict)  # printed, never written: outputs must hash the same each run


class ShardedEncoding:
    """Encoding split over the workers of a Dask cluster (``dense.shards`` > 1; the ``dist_info`` of
    :func:`embed_dataset`): the texts cut into ``shards`` contiguous parts, each encoded by a task that loads the
    model ``spec`` on its worker (once per worker process) and sorts its own part by length, as one process sorts
    them all; the rows come back in order. Batches then hold other texts than in one process: rows equal one
    process's to float rounding (docs/scale.md states the tolerance, tests/test_encode_sharded.py checks it).

    ``spec`` must name the model as the workers can reach it: ``builtin``, ``hub:NAME@REVISION``, or a lock
    file or model folder on storage they share (a path is made absolute here)."""

    world = 1  # the torchrun helpers' view: this process is the only rank, and writes the folder
    main = True

    def __init__(self, client, spec: str, where: str | None, shards: int, progress=None):
        path = Path(str(spec))
        self.spec = str(path.resolve()) if spec not in ("builtin",) and path.exists() else str(spec)
        self.client, self.where, self.shards, self.progress = client, where, shards, progress

    def encode(self, texts: list[str], params: DenseParams, what: str) -> tuple[np.ndarray, int]:
        """The rows of ``texts`` in order, and how many texts were cut at ``params.max_seq_length``."""
        from .core.cluster import gather, spans, task_key

        futures = [self.client.submit(encode_part, self.spec, self.where, texts[a:b], params,
                                      key=task_key(f"encode-{what}", k)) for k, (a, b) in enumerate(spans(len(texts), self.shards))]
        say = None if self.progress is None else (lambda line: self.progress(f"{what} {line}"))
        parts = gather(futures, say, "encoded")
        return np.concatenate([rows for rows, _ in parts]), sum(cut for _, cut in parts)


_WORKER_MODELS: dict[tuple, Encoder] = {}  # a Dask worker's models, loaded by its first encode_part


def encode_part(spec: str, where: str | None, texts: list[str], params: DenseParams) -> tuple[np.ndarray, int]:
    """A task of :class:`ShardedEncoding`: ``texts`` encoded on this worker, with the threads it was given."""
    import torch

    from .core.cluster import worker_threads
    from .core.memory import keep_freed_memory

    torch.set_num_threads(worker_threads())
    # a worker runs no command's main: without this each batch's activations went back to the kernel and were
    # faulted in again (SciFact on 2 workers: 98 s of system time, 9 s with it; two mallopt calls per task)
    keep_freed_memory()
    key = (spec, params.device)
    if key not in _WORKER_MODELS:
        _WORKER_MODELS[key] = load(spec, params.device, where)
    encoder = _WORKER_MODELS[key]
    rows = encoder.encode(texts, params.batch_size, params.max_seq_length, params.bf16, **_runtime_arg(params))
    return rows, encoder.last_truncated


def _encode(encoder: Encoder, texts: list[str], params: DenseParams, dist_info,
            what: str = "texts") -> tuple[np.ndarray | None, int]:
    """``encoder.encode`` of ``texts`` and how many were truncated. With ``dist_info`` of several processes
    each rank encodes its contiguous shard (sorted by length within it, as one process sorts them all) and
    rank 0 gets every row in order, the others None; the count is summed over ranks. ``dist_info`` is a
    ``retrieval_lab.distributed.Distributed`` passed in, not imported: what reads embeddings (the dense
    retriever) imports this module, and it runs no distributed code. A :class:`ShardedEncoding` has the
    workers of a Dask cluster encode the shards."""
    if isinstance(dist_info, ShardedEncoding):
        return dist_info.encode(texts, params, what)
    if dist_info is None or dist_info.world == 1:
        return (encoder.encode(texts, params.batch_size, params.max_seq_length, params.bf16, **_runtime_arg(params)),
                encoder.last_truncated)
    start, end = dist_info.span(len(texts))
    local = encoder.encode(texts[start:end], params.batch_size, params.max_seq_length, params.bf16,
                           **_runtime_arg(params))  # shard x H
    return dist_info.gather_rows(local, len(texts)), dist_info.total(encoder.last_truncated)


def _processes(dist_info) -> dict:
    # recorded only with several: one process writes exactly the report it always wrote
    if isinstance(dist_info, ShardedEncoding):
        return {"shards": dist_info.shards}
    return {"processes": dist_info.world} if dist_info is not None and dist_info.world > 1 else {}


def embed_dataset(encoder: Encoder, dataset, params: DenseParams, fields: list[str], dist_info=None,
                  documents: tuple[np.ndarray, int] | None = None) -> Embeddings:
    """Encode every document (``fields`` joined by a space) and every query, in memory.

    With ``dist_info`` (a ``Distributed`` of several processes, torchrun) every rank must call this: each
    encodes its shard, and rank 0's result holds every row (on the other ranks the matrices are None).
    Batches then hold other texts than with one process, so rows match one process's to float rounding.
    ``documents``: (N x H, truncated) this encoder already made of the corpus with ``params``, in corpus
    order (one process): used instead of encoding it again.
    """
    doc_ids = list(dataset.corpus)
    query_ids = list(dataset.queries)
    timings, truncated, arrays = {}, {}, {}
    for kind, texts in (("documents", [dataset.corpus[d].content(fields) for d in doc_ids]),
                        ("queries", [dataset.queries[q].text for q in query_ids])):
        start = time.perf_counter()
        if kind == "documents" and documents is not None:
            arrays[kind], truncated[kind] = documents
        else:
            arrays[kind], truncated[kind] = _encode(encoder, texts, params, dist_info, kind)
        timings[kind] = time.perf_counter() - start
    report = {
        "model": encoder.source,
        "dataset": str(dataset.path),
        "device": str(encoder.device),
        **_processes(dist_info),
        "fields": list(fields),
        "max_seq_length": params.max_seq_length,
        "batch_size": params.batch_size,
        "bf16": params.bf16,
        **_runtime_of(params),
        "dim": encoder.dim,
        "documents": len(doc_ids),
        "queries": len(query_ids),
        "truncated_documents": truncated["documents"],
        "truncated_queries": truncated["queries"],
        **_corpus_of(dataset),
    }
    timings = {"seconds_documents": round(timings["documents"], 3), "seconds_queries": round(timings["queries"], 3),
               "docs_per_second": round(len(doc_ids) / max(timings["documents"], 1e-9), 1)}
    return Embeddings(doc_ids, arrays["documents"], query_ids, arrays["queries"], report, timings)


def _runtime_arg(params: DenseParams) -> dict:
    # named only when not torch: an encoder of the user's own takes the four arguments it always took
    return {} if params.runtime == "torch" else {"runtime": params.runtime}


def _runtime_of(params: DenseParams, key: str = "runtime") -> dict:
    # recorded only when not torch: torch's embeddings keep exactly the report they always had
    return {} if params.runtime == "torch" else {key: params.runtime}


def _corpus_of(dataset) -> dict:
    """``{"corpus": fingerprint}`` of a dataset read from a folder (:mod:`core.fingerprint`); {} for one built in
    memory, which has no corpus file."""
    from .core import fingerprint
    from .core.data import corpus_file

    path = getattr(dataset, "path", None)
    if path is None or not corpus_file(path).is_file():
        return {}
    return {"corpus": fingerprint.of_dataset(path)}


def with_queries_of(encoder: Encoder, dataset, base: Embeddings, params: DenseParams, dist_info=None) -> Embeddings:
    """``base``'s documents unchanged, every query of ``dataset`` encoded by ``encoder``: the embeddings of a
    query-side fine-tuned model, which scores against the documents it was trained on. ``dist_info``: as
    :func:`embed_dataset`."""
    query_ids = list(dataset.queries)
    start = time.perf_counter()
    queries, truncated = _encode(encoder, [dataset.queries[q].text for q in query_ids], params, dist_info,
                                 "queries")  # Q x H
    seconds = time.perf_counter() - start
    report = {**base.report, "model": encoder.source, "documents_model": base.report.get("model"),
              **_processes(dist_info), "queries": len(query_ids), "truncated_queries": truncated,
              "bf16_queries": params.bf16, **_runtime_of(params, "runtime_queries")}
    return Embeddings(list(base.doc_ids), base.doc_embeddings, query_ids, queries, report,
                      {"seconds_queries": round(seconds, 3)})


def write_embeddings(embeddings: Embeddings, out_dir: str | Path) -> None:
    """Write the embeddings folder atomically (all files appear together or not at all)."""
    with atomic_path(out_dir, is_dir=True) as tmp:
        np.save(tmp / DOC_EMBEDDINGS, embeddings.doc_embeddings)
        np.save(tmp / QUERY_EMBEDDINGS, embeddings.query_embeddings)
        (tmp / DOC_IDS).write_text("".join(d + "\n" for d in embeddings.doc_ids), encoding="utf-8")
        (tmp / QUERY_IDS).write_text("".join(q + "\n" for q in embeddings.query_ids), encoding="utf-8")
        write_json(tmp / REPORT, embeddings.report)


def encode_dataset(encoder: Encoder, dataset, out_dir: str | Path, params: DenseParams,
                   fields: list[str], dist_info=None) -> dict:
    """:func:`embed_dataset` then :func:`write_embeddings` (by rank 0 alone with ``dist_info``); returns the
    report (``encode_report.json``) with the timings added."""
    embeddings = embed_dataset(encoder, dataset, params, fields, dist_info)
    if dist_info is None or dist_info.main:
        write_embeddings(embeddings, out_dir)
    return {**embeddings.report, **embeddings.timings}


def _read_ids(path: Path) -> list[str]:
    require_file(path)
    ids = path.read_text(encoding="utf-8").split("\n")
    if ids and ids[-1] == "":
        ids.pop()
    for number, item in enumerate(ids, start=1):
        if not item.strip():
            raise InputError("empty id", str(path), number)
    return ids


def _read_matrix(path: Path, rows: int, ids_path: Path, mapped: bool = False) -> np.ndarray:
    require_file(path)
    try:
        matrix = np.load(path, mmap_mode="r" if mapped else None, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:  # a damaged header or a cut file: one line, not a traceback
        raise InputError(f"unreadable array ({_first_line(exc)}): the file is damaged; encode again", str(path)) from None
    if matrix.ndim != 2 or matrix.shape[0] != rows:
        raise InputError(f"shape {matrix.shape} does not match {rows} ids in {ids_path.name}", str(path))
    if mapped:  # read by the shards, each checking its own rows
        return matrix
    if not np.isfinite(matrix).all():
        raise InputError("non-finite values", str(path))
    return np.ascontiguousarray(matrix, dtype=np.float32)


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def load_embeddings(directory: str | Path, documents_mapped: bool = False) -> Embeddings:
    """Read an embeddings folder written by :func:`encode_dataset` (or training), checked. ``documents_mapped``:
    the document matrix memory-mapped, its shape checked but not its values (the shards of a sharded dense
    retriever read and check their own rows)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError("embeddings folder not found", str(directory))
    doc_ids = _read_ids(directory / DOC_IDS)
    query_ids = _read_ids(directory / QUERY_IDS)
    docs = _read_matrix(directory / DOC_EMBEDDINGS, len(doc_ids), directory / DOC_IDS, documents_mapped)
    queries = _read_matrix(directory / QUERY_EMBEDDINGS, len(query_ids), directory / QUERY_IDS)
    if docs.shape[1] != queries.shape[1]:
        raise InputError(f"query dimension {queries.shape[1]} differs from document dimension "
                         f"{docs.shape[1]}", str(directory / QUERY_EMBEDDINGS))
    report_path = directory / REPORT
    report = json_loads(report_path.read_text(encoding="utf-8"), str(report_path)) if report_path.is_file() else {}
    return Embeddings(doc_ids, docs, query_ids, queries, report)
