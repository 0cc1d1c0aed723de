"""DDP (``torchrun --nproc_per_node N``): one global batch, embedded in shards.

Every rank builds the same global batch, embeds its contiguous shard of the queries
and of the documents, and all-gathers the embeddings (its own shard keeps its graph)
so the score matrix spans the global batch. Each rank's loss is the global loss;
backpropagating ``world x loss`` makes DDP's gradient average equal the
single-process gradient. With one process every helper here is a no-op.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Distributed:
    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0


SINGLE_PROCESS = Distributed()


def init_distributed(device: str = "auto") -> tuple[Distributed, str]:
    """Join the torchrun process group when ``WORLD_SIZE`` > 1 (nccl on CUDA, gloo on CPU)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return SINGLE_PROCESS, device
    import torch.distributed as dist

    cuda = torch.cuda.is_available() and device in ("auto", "cuda")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    return Distributed(dist.get_rank(), dist.get_world_size()), (f"cuda:{local}" if cuda else "cpu")


def barrier(dist_info: Distributed) -> None:
    if dist_info.world > 1:
        import torch.distributed as dist

        dist.barrier()


def end_distributed(dist_info: Distributed) -> None:
    """Wait for every rank, then leave the process group."""
    if dist_info.world > 1:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()


def gather(local: torch.Tensor, sizes: list[int], dist_info: Distributed) -> torch.Tensor:
    """All ranks' rows in rank order; only this rank's rows carry gradient."""
    if dist_info.world == 1:
        return local
    import torch.distributed as dist

    width = max(sizes)
    padded = F.pad(local, (0, 0, 0, width - local.shape[0]))  # width x H
    buckets = [torch.empty_like(padded) for _ in range(dist_info.world)]
    dist.all_gather(buckets, padded.detach().contiguous())
    buckets[dist_info.rank] = padded  # our shard keeps its graph
    return torch.cat([b[:n] for b, n in zip(buckets, sizes)])  # sum(sizes) x H


@contextlib.contextmanager
def distributed_model(encoder, dist_info: Distributed):
    """While training, route ``encoder.embed`` through a DistributedDataParallel wrapper."""
    if dist_info.world == 1:
        yield encoder.model
        return
    from torch.nn.parallel import DistributedDataParallel

    plain = encoder.model
    unused = _unused_parameters(encoder)
    for p in unused:  # e.g. BERT's pooler: DDP would wait forever for its gradient
        p.requires_grad_(False)
    ids = [encoder.device.index] if encoder.device.type == "cuda" else None
    encoder.model = DistributedDataParallel(plain, device_ids=ids)
    try:
        yield encoder.model
    finally:
        encoder.model = plain
        for p in unused:
            p.requires_grad_(True)


def _unused_parameters(encoder) -> list[torch.nn.Parameter]:
    """Parameters that get no gradient from ``embed`` (probed on one text, RNG state untouched)."""
    params = [p for p in encoder.model.parameters() if p.requires_grad]
    with torch.random.fork_rng(devices=[encoder.device] if encoder.device.type == "cuda" else []):
        grads = torch.autograd.grad(encoder.embed(["probe"], 8).sum(), params, allow_unused=True)
    return [p for p, g in zip(params, grads) if g is None]
