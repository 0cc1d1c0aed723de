"""Many processes (``torchrun --nproc-per-node N``): the process group, shards and gathers.

Training (DDP): every rank builds the same global batch, embeds its contiguous shard
of the queries and of the documents, and all-gathers the embeddings (its own shard
keeps its graph) so the score matrix spans the global batch. Each rank's loss is the
global loss; backpropagating ``world x loss`` makes DDP's gradient average equal the
single-process gradient.

Encoding: every rank encodes its contiguous shard of the texts and rank 0 gathers the
rows in order (:meth:`Distributed.gather_rows`) and writes them.

With one process every helper here is a no-op.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

GATHER_ROWS = 1 << 16  # rows per gather round: rank 0 receives at most world x this x H floats at once


def shard(n: int, world: int, rank: int) -> tuple[int, int]:
    """Contiguous [start, end) of ``n`` items for ``rank``: sizes differ by at most one."""
    base, extra = divmod(n, world)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


@dataclass(frozen=True)
class Distributed:
    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    def span(self, n: int) -> tuple[int, int]:
        """This rank's [start, end) of ``n`` items (:func:`shard`)."""
        return shard(n, self.world, self.rank)

    def gather_rows(self, local: np.ndarray, n: int) -> np.ndarray | None:
        """The ``n x H`` float32 matrix whose rows :meth:`span` each rank holds, in order, on rank 0
        (None on the others). Rows travel as float32, bit for bit."""
        if self.world == 1:
            return local
        import torch.distributed as dist

        spans = [shard(n, self.world, r) for r in range(self.world)]
        device = _device()
        local = torch.from_numpy(np.ascontiguousarray(local, dtype=np.float32))  # rows x H
        out = np.empty((n, local.shape[1]), dtype=np.float32) if self.main else None
        longest = max(b - a for a, b in spans)
        for lo in range(0, longest, GATHER_ROWS):  # same rounds on every rank: all know `spans`
            rows = min(GATHER_ROWS, longest - lo)
            piece = torch.zeros(rows, local.shape[1], dtype=torch.float32, device=device)  # padded
            mine = local[lo:lo + rows]
            piece[:len(mine)] = mine.to(device)
            buckets = [torch.empty_like(piece) for _ in spans] if self.main else None
            dist.gather(piece, buckets, dst=0)
            if self.main:
                for (a, b), bucket in zip(spans, buckets):
                    take = max(0, min(rows, b - a - lo))
                    out[a + lo:a + lo + take] = bucket[:take].cpu().numpy()
        return out

    def total(self, value: int) -> int:
        """The sum of ``value`` over every rank."""
        if self.world == 1:
            return value
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.int64, device=_device())
        dist.all_reduce(t)
        return int(t.item())


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


def _device() -> torch.device:
    """Where collectives run: nccl needs this rank's GPU (set by :func:`init_distributed`), gloo the CPU."""
    import torch.distributed as dist

    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def broadcast_module(module: torch.nn.Module, dist_info: Distributed) -> None:
    """Give every rank rank 0's parameters and buffers (e.g. the validation-best weights rank 0 restored)."""
    if dist_info.world == 1:
        return
    import torch.distributed as dist

    with torch.no_grad():
        for tensor in module.state_dict().values():
            dist.broadcast(tensor, src=0)


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
