"""Which CPU a measurement was made on: enough to tell two CPUs apart, nothing that identifies a user.

Cloud machines mask the model name: "AMD EPYC" is what a Zen 3 without AVX-512 and a Zen 4 with
AVX512-BF16 both say, and they train at different speeds with different float bits. So beside the name
a record keeps the CPU's vendor, family, model and stepping and the instruction sets that change speed
or numerics; two records name the same CPU only when all of it agrees, and a record without it (made
before it was kept, or where ``/proc/cpuinfo`` is missing) cannot be judged either way.
"""

from __future__ import annotations

import platform
from pathlib import Path

# the instruction sets that change a kernel's speed or its float bits (x86: "flags"; Arm: "Features")
ISA = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8",
       "asimd", "sve", "sve2", "bf16", "i8mm")
# the fields of /proc/cpuinfo that name a CPU's make below its (maskable) model name
_IDENTITY = (("vendor_id", ""), ("cpu family", "family "), ("model", "model "), ("stepping", "stepping "),
             ("CPU implementer", "implementer "), ("CPU part", "part "), ("CPU variant", "variant "),
             ("CPU revision", "revision "))


def cpu(cpuinfo: str | None = None) -> dict:
    """``{"cpu": model name, "cpu_id": "AuthenticAMD family 25 model 1 stepping 1", "cpu_isa": [...]}`` of the
    first processor in ``/proc/cpuinfo`` (or the text given); ``cpu_id`` and ``cpu_isa`` are None without it."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    first: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if first:
                break  # every processor of a machine is the same make: the first one says it
            continue
        key, _, value = line.partition(":")
        first.setdefault(key.strip(), value.strip())
    name = first.get("model name") or platform.processor() or platform.machine() or "unknown"
    identity = " ".join(label + first[key] for key, label in _IDENTITY if first.get(key))
    flags = set((first.get("flags") or first.get("Features") or "").split())
    return {"cpu": name, "cpu_id": identity or None, "cpu_isa": [f for f in ISA if f in flags] if identity else None}


def same_cpu(a: dict, b: dict) -> bool | None:
    """Whether two machine records (each holding :func:`cpu`'s keys) name one CPU: None when either lacks the
    identity, for a masked model name cannot tell a Zen 3 from a Zen 4."""
    if not a.get("cpu_id") or not b.get("cpu_id"):
        return None
    return all(a.get(key) == b.get(key) for key in ("cpu", "cpu_id", "cpu_isa"))


def describe(machine: dict) -> str:
    """The model name, then the identity and instruction sets where recorded."""
    if not machine.get("cpu_id"):
        return str(machine.get("cpu"))
    return f"{machine.get('cpu')} ({machine['cpu_id']}; {' '.join(machine.get('cpu_isa') or []) or 'no listed ISA'})"
