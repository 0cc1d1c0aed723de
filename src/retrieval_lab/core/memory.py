"""Where a process's freed memory goes: kept for reuse, not handed back to the kernel batch after batch.

Every command calls :func:`keep_freed_memory` first (``cli.main``); so does a Dask worker before its first
encode (:func:`retrieval_lab.encoder.encode_part`), which no command's ``main`` runs in.
"""

from __future__ import annotations

import ctypes
import os

# glibc's mallopt parameters (malloc.h) and the values keep_freed_memory gives them, in bytes
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_HEAP_BLOCKS_UP_TO = 256 << 20  # a batch's activations (attention scores at 64 x 256 tokens: 200 MB)
_KEEP_FREE_AT_HEAP_TOP = 2**31 - 1  # the most mallopt takes (a C int)


def keep_freed_memory() -> bool:
    """Have glibc's malloc keep freed memory for the next allocation instead of returning it to the kernel.

    By default glibc maps each block over a threshold (128 KiB, rising to at most 32 MiB) on its own and
    unmaps it when freed, and trims the heap once 128 KiB at its top are free. A model's activations are
    allocated and freed batch after batch, so every batch's memory came back as new pages the kernel had
    to fault in and zero, a system-time cost paid on every batch (measured in docs/lab-notes.md, "Keeping
    freed memory"). Blocks up to 256 MiB are served from the heap and the heap is never trimmed, so the
    pages are reused instead. Only where freed memory
    goes changes, never the arithmetic (the embeddings' bytes are the same). Larger blocks (a big
    corpus's embedding matrix, allocated once) are still mapped on their own and returned when freed;
    the heap keeps its peak until the process exits, which a command does when its work is done. Other
    C libraries are left as they are. True when glibc took both settings.
    """
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
    except (AttributeError, ValueError, OSError):  # no confstr, or not a GNU C library
        return False
    libc = ctypes.CDLL(None)  # the C library this process already runs on
    return (libc.mallopt(_M_MMAP_THRESHOLD, _HEAP_BLOCKS_UP_TO) == 1
            and libc.mallopt(_M_TRIM_THRESHOLD, _KEEP_FREE_AT_HEAP_TOP) == 1)
