"""The ``train`` stage: load the base model and the data, fine-tune, save the model, encode the dataset, log."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core.atomic import atomic_path
from ..core.data import Dataset
from ..core.errors import InputError
from ..core.params import Params, base_model
from ..distributed import end_distributed, init_distributed
from . import st_trainer
from .checkpoint import default_checkpoint, fingerprint, weights_digest
from .data import check_negatives_strategy, training_data, with_frozen_documents
from .loop import LoopOptions, TrainResult
from .spec import TrainSpec
from .validation import Candidates, EncodedDocuments, dense_means


@dataclass(frozen=True)
class TrainingReport:
    """training.json: what a fine-tuned model was trained from and how its weights were chosen, saved with
    the model so a model folder found later still says where it came from."""

    variant: str
    fingerprint: dict  # what a checkpoint must match to resume this run
    result: TrainResult
    device: str
    world_size: int
    select: str
    select_measure: str
    patience: int | None
    negatives: str
    corpus_pairs: dict | None  # pairs drawn from the corpus, when the variant trains on them
    base_model: dict  # the encoder's source: lock, hashes or folder
    validate_candidates: int | None = None  # train.validate_candidates: validation re-ranked the base's top N
    select_min_delta: float = 0.0  # train.select_min_delta: the margin an improvement needed

    def to_json(self) -> dict:
        r = self.result
        return {"variant": self.variant, "fingerprint": self.fingerprint, "steps": r.steps, "device": self.device,
                "world_size": self.world_size, "first_loss": r.history[0]["loss"],
                "last_loss": r.history[-1]["loss"], "validation": r.validation, "selected_step": r.selected_step,
                "selection": {"select": self.select, "measure": self.select_measure, "patience": self.patience,
                              "ended_by_patience": r.patience_stop,
                              **({"validate_candidates": self.validate_candidates}
                                 if self.validate_candidates is not None else {}),
                              **({"min_delta": self.select_min_delta} if self.select_min_delta else {})},
                "negatives": self.negatives,
                **({"corpus_pairs": self.corpus_pairs} if self.corpus_pairs else {}),
                "base_model": self.base_model}


def run_training(params: Params, dataset_dir: str | Path, negatives: str | Path, variant_name: str,
                 model_out: str | Path, embeddings_out: str | Path, live_dir: str | Path, *,
                 base_embeddings: str | Path | None = None, stop_after: int | None = None,
                 resume: str | Path | None = None, checkpoint: str | Path | None = None,
                 progress: bool = True) -> TrainResult:
    """Fine-tune ``variant_name`` on ``negatives``; write the model (with training.json), the embeddings and
    the dvclive folder, unless the run stopped early (``stop_after``), which leaves only its checkpoint.

    A query-side variant trains against ``base_embeddings`` (the base model's embeddings folder), whose
    documents its embeddings folder keeps; its mined negatives are unused (every document is a candidate).
    """
    from ..core.data import empty_documents_note, load_dataset
    from ..encoder import embed_dataset, load, load_embeddings, with_queries_of, write_embeddings

    spec = TrainSpec.from_params(params.train, variant_name)  # an unknown variant or loss fails here, first
    train = spec.train
    if train.backend == st_trainer.NAME:
        st_trainer.refuse_unsupported(spec)
    frozen = None
    if spec.query_side:
        if base_embeddings is None:
            raise InputError(f"variant {variant_name!r} trains the query side: it needs --base-embeddings",
                             field="--base-embeddings")
        frozen = load_embeddings(base_embeddings)
    check_negatives_strategy(negatives, spec)
    dist_info, device = init_distributed(params.dense.device)
    if train.backend == st_trainer.NAME:
        st_trainer.refuse_processes(dist_info.world)
    dataset = load_dataset(dataset_dir)
    fields = list(params.retrieve.fields)
    note = empty_documents_note(dataset.corpus, fields, "an empty positive trains on an empty text")
    if note and dist_info.main:
        print(f"train: {note}")
    data = training_data(dataset, negatives, train.positives_per_query, fields, train.positives_at_least, spec)
    if data.pseudo and dist_info.main:
        p = data.pseudo
        print(f"train: {p['pairs']} {p['kind']} pairs from {p['drawn']} corpus documents drawn "
              f"({p['skipped']} skipped: no {'title or text' if p['kind'] == 'title' else 'second sentence'})")
    if frozen is not None:
        if set(frozen.doc_ids) != set(dataset.corpus):
            raise InputError(f"its {len(frozen.doc_ids)} documents are not the {len(dataset.corpus)} of "
                             f"{dataset.path}", str(base_embeddings), field="--base-embeddings")
        data = with_frozen_documents(data, frozen)
    model, where = base_model(params)
    encoder = load(model, device, where)
    # both limits before training: the final encode reads dense.max_seq_length only after every step
    encoder.check_max_length(train.max_seq_length, "train.max_seq_length")
    encoder.check_max_length(params.dense.max_seq_length, "dense.max_seq_length")
    base_digest = weights_digest(encoder.model)
    fp = fingerprint(base_digest, spec, data, dist_info.world)
    if stop_after is not None and checkpoint is None:
        checkpoint = default_checkpoint(model_out)
    encoded = None
    if frozen is None and dist_info.world == 1:
        encoded = EncodedDocuments()
        if base_embeddings is not None:
            _keep_base_documents(encoded, base_digest, load_embeddings(base_embeddings), encoder, dataset,
                                 fields, params)
    options = LoopOptions(fp, stop_after=stop_after, resume=resume, checkpoint=checkpoint,
                          validate=validator(dataset, fields, params, frozen, encoded), dist_info=dist_info,
                          progress=progress)
    result = spec.fine_tune(encoder, data, spec, options)
    if result.stopped_early:
        end_distributed(dist_info)
        return result
    # every rank re-encodes its shard (fine_tune left rank 0's weights on all); rank 0 writes
    if frozen is None:
        # validation encodes on torch: its rows stand in for this encode only when this one runs on torch too
        documents = (encoded.get(weights_digest(encoder.model))
                     if encoded is not None and params.dense.runtime == "torch" else None)
        embeddings = embed_dataset(encoder, dataset, params.dense, fields, dist_info, documents)
    else:
        embeddings = with_queries_of(encoder, dataset, frozen, params.dense, dist_info)
    if dist_info.main:
        report = TrainingReport(variant_name, fp, result, str(encoder.device), dist_info.world, train.select,
                                train.select_measure, train.patience, str(negatives), data.pseudo or None,
                                encoder.source, train.validate_candidates if frozen is None else None,
                                train.select_min_delta)
        encoder.save(model_out, {"training.json": report.to_json()})
        write_embeddings(embeddings, embeddings_out)
        write_live(live_dir, result)
    end_distributed(dist_info)
    return result


def _keep_base_documents(encoded: EncodedDocuments, digest: str, base, encoder, dataset: Dataset,
                         fields: list[str], params: Params) -> None:
    """The base model's documents from its embeddings folder, when one process made them with this model,
    on this device, with these settings, in corpus order: then they are the bytes an encode here gives."""
    report = base.report
    made_alike = (report.get("model") == encoder.source and report.get("device") == str(encoder.device)
                  and "processes" not in report and report.get("fields") == list(fields)
                  and report.get("max_seq_length") == params.dense.max_seq_length
                  and report.get("batch_size") == params.dense.batch_size
                  and report.get("bf16") == params.dense.bf16 and "runtime" not in report  # validation runs on torch
                  and list(base.doc_ids) == list(dataset.corpus))
    if made_alike:
        encoded.keep(digest, base.doc_embeddings, int(report.get("truncated_documents", 0)))


def validator(dataset: Dataset, fields: list[str], params: Params, frozen=None,
              encoded: EncodedDocuments | None = None) -> Callable[[object], dict] | None:
    """Score the val queries against the whole corpus with :func:`dense_means` (None: no val query);
    with ``frozen`` (embeddings), against its documents: only the queries are re-encoded. ``encoded``
    keeps the corpus embeddings each validation makes (for the stage's final encode). With
    ``train.validate_candidates`` (both sides), against the base model's candidates (:class:`Candidates`)."""
    qrels = {q: j for q, j in dataset.qrels.get("val", {}).items() if any(r > 0 for r in j.values())}
    if not qrels:
        return None
    query_texts = {q: dataset.queries[q].text for q in qrels}
    doc_texts = {d: dataset.corpus[d].content(fields) for d in dataset.corpus}
    documents = None if frozen is None else (frozen.doc_ids, frozen.doc_embeddings)
    measures = list(params.evaluate.measures)
    per_query = params.train.validate_candidates
    candidates = Candidates(per_query) if per_query is not None and frozen is None else None
    return lambda encoder: dense_means(encoder, qrels, query_texts, doc_texts, params.dense,
                                       params.retrieve.depth, measures, documents, encoded, candidates)


def write_live(live_dir: str | Path, result: TrainResult) -> None:
    """The dvclive folder (plots/metrics/train/{loss,lr}.tsv, val/*.tsv, metrics.json), atomically.

    metrics.json (a DVC metric) holds dvclive's summary, the latest value of each curve, and under
    ``selected`` the validation of the weights the model keeps: with ``train.select: best`` an earlier
    epoch may win, and that, not the last epoch, is what ``dvc exp show`` should compare.
    """
    from dvclive import Live

    with atomic_path(live_dir, is_dir=True) as tmp:
        live = Live(str(tmp), dvcyaml=None, save_dvc_exp=False, report=None)
        val_at = {v["step"]: v["metrics"] for v in result.validation}
        for step in sorted(set(val_at) | {h["step"] for h in result.history}):
            live.step = step
            for h in result.history:
                if h["step"] == step:
                    live.log_metric("train/loss", h["loss"])
                    live.log_metric("train/lr", h["lr"])
            for name, value in val_at.get(step, {}).items():
                live.log_metric(f"val/{name}", value)
        kept = result.selected_step if result.selected_step is not None else max(val_at, default=None)
        if kept in val_at:
            live.summary["selected"] = {"step": kept, "val": val_at[kept]}
        live.make_summary()
        live.end()
