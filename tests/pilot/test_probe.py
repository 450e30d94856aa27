"""Node probing: on this machine, and the naming rules from sample texts."""

from __future__ import annotations

import dataclasses
import os
import platform
import re

import pytest

from pilot import probe

RHEL9 = '''NAME="Red Hat Enterprise Linux"
VERSION="9.3 (Plow)"
ID="rhel"
ID_LIKE="fedora"
VERSION_ID="9.3"
PRETTY_NAME="Red Hat Enterprise Linux 9.3 (Plow)"
'''
ALMA9 = 'NAME="AlmaLinux"\nVERSION="9.4 (Seafoam Ocelot)"\nID="almalinux"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.4"\n'
ROCKY8 = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="8.9"\n'
CENTOS7 = 'NAME="CentOS Linux"\nVERSION="7 (Core)"\nID="centos"\nID_LIKE="rhel fedora"\nVERSION_ID="7"\n'
SL7 = 'NAME="Scientific Linux"\nID="scientific"\nID_LIKE="rhel centos fedora"\nVERSION_ID="7.9"\n'
STREAM9 = 'NAME="CentOS Stream"\nID="centos"\nID_LIKE="rhel fedora"\nVERSION_ID="9"\n'
ORACLE8 = 'NAME="Oracle Linux Server"\nID="ol"\nID_LIKE="fedora"\nVERSION_ID="8.9"\n'
DEBIAN12 = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n'
UBUNTU22 = 'NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nID_LIKE=debian\n'
FEDORA39 = "NAME=\"Fedora Linux\"\nID=fedora\nVERSION_ID=39\n"
ALPINE = "NAME=\"Alpine Linux\"\nID=alpine\nVERSION_ID=3.19.1\n"
AMAZON2023 = 'NAME="Amazon Linux"\nID="amzn"\nID_LIKE="fedora"\nVERSION_ID="2023"\n'
AMAZON2 = 'NAME="Amazon Linux"\nID="amzn"\nID_LIKE="centos rhel fedora"\nVERSION_ID="2"\n'
DEBIAN_SID = 'PRETTY_NAME="Debian GNU/Linux trixie/sid"\nID=debian\n'


@pytest.mark.parametrize(
    "machine, text, expected",
    [
        ("x86_64", RHEL9, "x86_64-el9"),
        ("x86_64", ALMA9, "x86_64-el9"),
        ("aarch64", ALMA9, "aarch64-el9"),
        ("x86_64", ROCKY8, "x86_64-el8"),
        ("x86_64", CENTOS7, "x86_64-el7"),
        ("x86_64", SL7, "x86_64-el7"),
        ("x86_64", STREAM9, "x86_64-el9"),
        ("x86_64", ORACLE8, "x86_64-el8"),
        ("x86_64", DEBIAN12, "x86_64-debian12"),
        ("amd64", DEBIAN12, "x86_64-debian12"),
        ("arm64", UBUNTU22, "aarch64-ubuntu22"),
        ("x86_64", FEDORA39, "x86_64-fedora39"),
        ("x86_64", ALPINE, "x86_64-alpine3"),
        ("x86_64", AMAZON2023, "x86_64-amzn2023"),
        ("x86_64", AMAZON2, "x86_64-amzn2"),
        ("x86_64", DEBIAN_SID, "x86_64-debian"),
        ("x86_64", "", "x86_64-linux"),
    ],
)
def test_dirac_platform(machine, text, expected):
    assert probe.dirac_platform(machine, probe.parse_os_release(text)) == expected


def test_parse_os_release_quoting_and_comments():
    text = '# comment\n\nNAME="Some \\"quoted\\" OS"\nID=\'single\'\nBROKEN="unterminated\nVERSION_ID=1.2\n'
    parsed = probe.parse_os_release(text)
    assert parsed["NAME"] == 'Some "quoted" OS'
    assert parsed["ID"] == "single"
    assert parsed["VERSION_ID"] == "1.2"
    assert "BROKEN" in parsed


@pytest.mark.parametrize(
    "machine, system, expected",
    [
        ("x86_64", "Linux", "lx-amd64"),
        ("amd64", "Linux", "lx-amd64"),
        ("aarch64", "Linux", "lx-arm64"),
        ("arm64", "Linux", "lx-arm64"),
        ("i686", "Linux", "lx-x86"),
        ("ppc64le", "Linux", "lx-ppc64le"),
        ("s390x", "Linux", "lx-s390x"),
        ("riscv64", "Linux", "lx-riscv64"),
        ("mips64", "Linux", "lx-mips64"),
        ("x86_64", "Darwin", "darwin-x64"),
        ("arm64", "Darwin", "darwin-arm64"),
        ("i86pc", "SunOS", "sol-x86"),
    ],
)
def test_ge_arch(machine, system, expected):
    assert probe.ge_arch(machine, system) == expected


MEMINFO = """MemTotal:       16303428 kB
MemFree:         1191292 kB
MemAvailable:    9012345 kB
Buffers:          400000 kB
Cached:          6000000 kB
SwapTotal:       2097148 kB
SwapFree:        2097148 kB
HugePages_Total:       0
"""


def test_parse_meminfo_in_bytes():
    mem = probe.parse_meminfo(MEMINFO)
    assert mem == probe.Memory(16303428 * 1024, 9012345 * 1024, 2097148 * 1024)


def test_parse_meminfo_without_memavailable_uses_free_buffers_cached():
    old_kernel = "\n".join(line for line in MEMINFO.splitlines() if not line.startswith("MemAvailable"))
    mem = probe.parse_meminfo(old_kernel)
    assert mem.mem_free == (1191292 + 400000 + 6000000) * 1024


def test_parse_meminfo_garbage_gives_zeros():
    assert probe.parse_meminfo("nonsense\n: x\nKey: notanumber kB\n") == probe.Memory(0, 0, 0)


def test_cpu_count_on_this_machine():
    cores = probe.cpu_count()
    assert isinstance(cores, int)
    assert 1 <= cores <= (os.cpu_count() or 1)
    assert cores == len(os.sched_getaffinity(0))


def test_memory_on_this_machine():
    mem = probe.read_memory()
    assert all(isinstance(v, int) for v in (mem.mem_total, mem.mem_free, mem.swap_total))
    assert mem.mem_total > 64 * 1024**2
    assert 0 < mem.mem_free <= mem.mem_total
    assert mem.swap_total >= 0


def test_np_load_avg():
    assert probe.np_load_avg(3.0, 4) == 0.75
    assert probe.np_load_avg(1.5, 0) == 1.5


def test_probe_node_on_this_machine():
    node = probe.probe_node()
    assert node.host and isinstance(node.host, str)
    assert node.cores == probe.cpu_count()
    assert node.arch == probe.ge_arch(platform.machine())
    assert re.fullmatch(r"[a-z0-9_]+-[a-z]+[0-9]*", node.platform), node.platform
    assert node.platform.startswith(probe.normalise_machine(platform.machine()) + "-")
    load = node.load()
    assert set(load) == {"num_proc", "mem_total", "mem_free", "swap_total", "arch", "load_avg", "np_load_avg"}
    assert isinstance(load["num_proc"], int) and isinstance(load["mem_free"], int)
    assert isinstance(load["load_avg"], float) and load["load_avg"] >= 0
    assert load["np_load_avg"] == pytest.approx(load["load_avg"] / node.cores)


def test_probe_node_platform_override():
    assert probe.probe_node("x86_64-el9").platform == "x86_64-el9"


def test_a_sample_refreshes_the_load_and_keeps_what_was_probed_once():
    node = probe.probe_node("x86_64-el9")
    stale = dataclasses.replace(node, mem_free=1, load_avg=99.0)
    fresh = stale.sampled()
    assert (fresh.host, fresh.cores, fresh.arch, fresh.platform, fresh.mem_total) == (
        node.host, node.cores, node.arch, "x86_64-el9", node.mem_total)
    assert fresh.mem_free > 1                   # read now, not the stale 1
    assert 0 <= fresh.load_avg < 99.0
