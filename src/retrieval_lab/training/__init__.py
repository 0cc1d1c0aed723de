"""Contrastive fine-tuning of the dense encoder (stage ``train``), resumable and verified.

One step: B training queries and the documents of their batch (positives + mined
negatives, deduplicated by ID; :mod:`.batching`) are embedded, scored
``s_ij = <q_i, d_j> / temperature``, and :func:`~retrieval_lab.losses.multi_positive_nce`
is minimised with the positive mask joined on IDs. Every document of the batch is
a candidate for every query, so the other queries' documents act as in-batch
negatives alongside the mined ones. AdamW; linear warmup, then a constant, linear or
cosine learning rate (``train.schedule``).

Query side (a variant with ``side: query``): only queries are encoded; every document's
frozen base embedding (the ``encode`` stage's) is a candidate, so the whole corpus serves
as negatives, a step costs a query batch, and no document is re-encoded afterwards.

Determinism. On CPU a run is a function of (base weights, data, params, seed):
data order comes from ``(seed, epoch)``, dropout from the seeded torch generator,
and ``torch.use_deterministic_algorithms`` is on, so an interrupted and resumed run
reproduces the uninterrupted one bit for bit (``check-resume`` checks it) on the
same machine and thread count. On CUDA, bf16 autocast and cuBLAS/cuDNN kernel
choices make runs repeatable only to rounding (``CUBLAS_WORKSPACE_CONFIG`` is set
and deterministic algorithms requested, warn-only where none exist); under DDP
each rank draws its own dropout, so the run also depends on the world size, which
the checkpoint fingerprint records.

The package, in the order one run uses it (DDP's process group, shards and gathers live in
``retrieval_lab.distributed``, which the ``encode`` stage shares):

``spec``        :class:`TrainSpec`: ``train.*`` and one variant, resolved once (epochs, temperature, side, loss)
``batching``    examples, their batches and positive masks, each epoch's seeded order
``data``        the training examples and texts (negatives file or mined records -> :class:`TrainingData`)
``corpus_pairs`` pseudo-query pairs from the corpus text (inverse cloze, title) mixed into a both-sides run
``checkpoint``  the run's identity (fingerprint) and its resumable state (``state.pt``)
``validation``  an encoder measured in memory: the val metrics that select the weights
``loop``        :func:`fine_tune`: one training run, top to bottom; its options in :class:`LoopOptions`
``stage``       :func:`run_training`: the ``train`` stage (load, fine-tune, save, encode, log)
``resume``      :func:`check_resume`: a stopped and resumed run equals a straight one
"""

from __future__ import annotations

from ..distributed import Distributed, distributed_model, init_distributed
from .checkpoint import (
    default_checkpoint,
    fingerprint,
    fingerprint_differences,
    load_checkpoint,
    save_checkpoint,
    weights_digest,
)
from .data import TrainingData, check_negatives_strategy, training_data, with_frozen_documents
from .loop import LoopOptions, TrainResult, fine_tune, improves, total_steps, train_step
from .resume import check_resume
from .spec import TrainSpec
from .stage import run_training, validator, write_live

__all__ = [
    "Distributed", "LoopOptions", "TrainResult", "TrainSpec", "TrainingData", "check_negatives_strategy",
    "check_resume", "default_checkpoint", "distributed_model", "fine_tune", "fingerprint", "fingerprint_differences",
    "improves",
    "init_distributed", "load_checkpoint", "run_training", "save_checkpoint", "total_steps", "train_step",
    "training_data", "validator", "weights_digest", "with_frozen_documents", "write_live",
]
