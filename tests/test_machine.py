"""The CPU a measurement names (machine.py): its make read from /proc/cpuinfo text written here by hand."""

from __future__ import annotations

from retrieval_lab.machine import cpu, describe, same_cpu

ONE_CORE = """vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu sse2 avx fma avx2 sha_ni vaes
"""
ZEN3 = "processor\t: 0\n" + ONE_CORE + "\nprocessor\t: 1\n" + ONE_CORE  # two processors: the first is read
ZEN4 = ZEN3.replace("model\t\t: 1", "model\t\t: 17").replace("avx2 ", "avx2 avx512f avx512_vnni avx512_bf16 ")
GRAVITON = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd sve i8mm bf16 sve2
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x0
CPU part\t: 0xd4f
CPU revision\t: 1
"""


def test_the_make_and_instruction_sets_are_read_from_the_first_processor():
    assert cpu(ZEN3) == {"cpu": "AMD EPYC", "cpu_id": "AuthenticAMD family 25 model 1 stepping 1",
                         "cpu_isa": ["avx2", "fma"]}
    assert cpu(ZEN4)["cpu_isa"] == ["avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16"]
    arm = cpu(GRAVITON)
    assert arm["cpu_id"] == "implementer 0x41 part 0xd4f variant 0x0 revision 1"
    assert arm["cpu_isa"] == ["asimd", "sve", "sve2", "bf16", "i8mm"]
    assert cpu("")["cpu_id"] is None and cpu("")["cpu_isa"] is None  # no /proc/cpuinfo: nothing to tell CPUs apart


def test_one_masked_name_is_two_cpus_and_a_record_without_the_make_cannot_be_judged():
    zen3, zen4 = cpu(ZEN3), cpu(ZEN4)
    assert zen3["cpu"] == zen4["cpu"] == "AMD EPYC"
    assert same_cpu(zen3, zen4) is False and same_cpu(zen3, dict(zen3)) is True
    assert same_cpu(zen3, {**zen3, "cpu_isa": ["avx2"]}) is False  # the same make, other instruction sets (a VM's mask)
    assert same_cpu({"cpu": "AMD EPYC"}, zen3) is None and same_cpu({"cpu": "AMD EPYC"}, {"cpu": "AMD EPYC"}) is None
    assert describe(zen4) == "AMD EPYC (AuthenticAMD family 25 model 17 stepping 1; avx2 fma avx512f avx512_vnni avx512_bf16)"
    assert describe({"cpu": "AMD EPYC"}) == "AMD EPYC"
