"""What one run trains: ``train.*`` and one of ``train.variants``, resolved once into a :class:`TrainSpec`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..core.errors import InputError
from ..core.params import TrainParams, TrainVariant
from ..losses import LossFn, get_loss

# train.backend -> the module of this package whose ``fine_tune(encoder, data, spec, options)`` trains
BACKENDS = {"retrieval-lab": "loop", "sentence-transformers": "st_trainer"}


@dataclass(frozen=True)
class TrainSpec:
    """One training run's settings, the only ones the loop, the checkpoint and the stage read.

    ``train``: ``train.*`` with the variant's own ``epochs`` (when it has some) in place of
    ``train.epochs``; ``variant``: the ``train.variants`` entry named ``name``; ``loss``: the
    function ``train.loss`` names, looked up once (an unknown name fails before any model loads).
    """

    name: str
    variant: TrainVariant
    train: TrainParams
    loss: LossFn

    @classmethod
    def from_params(cls, train: TrainParams, name: str, **changes) -> TrainSpec:
        """The run of variant ``name`` under ``train``; ``changes`` set further ``train.*`` fields for this
        run only (a tiny resume check, a benchmark's fixed epochs), after the variant's epochs."""
        if name not in train.variants:
            raise InputError(f"unknown variant {name!r} (choices: {', '.join(sorted(train.variants))})",
                             field="--variant")
        variant = train.variants[name]
        if variant.epochs is not None:
            changes = {"epochs": variant.epochs, **changes}
        resolved = dataclasses.replace(train, **changes) if changes else train
        if resolved.backend not in BACKENDS:
            raise InputError(f"unknown train.backend {resolved.backend!r} (choices: {', '.join(BACKENDS)})",
                             field="train.backend")
        return cls(name, variant, resolved, get_loss(resolved.loss))

    def changed(self, **changes) -> TrainSpec:
        """This run with some ``train.*`` fields set otherwise."""
        train = dataclasses.replace(self.train, **changes)
        return dataclasses.replace(self, train=train, loss=get_loss(train.loss))

    @property
    def fine_tune(self):
        """The ``fine_tune`` of ``train.backend`` (imported on first use: the sentence-transformers one pulls in
        transformers' Trainer)."""
        import importlib

        return importlib.import_module(f".{BACKENDS[self.train.backend]}", __package__).fine_tune

    @property
    def temperature(self) -> float:
        return self.variant.temperature

    @property
    def negatives(self) -> str:
        """The mining strategy of the negatives this variant trains on (hard | random)."""
        return self.variant.negatives

    @property
    def query_side(self) -> bool:
        """Only the query encoder trains, against every document's frozen base embedding."""
        return self.variant.side == "query"
