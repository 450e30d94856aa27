"""Describe the worker node the pilot runs on.

Every value the pilot sends in its match request (``load``, ``platform``,
``host``) comes from here. Each step is a small pure function over text or
plain values (``parse_meminfo``, ``parse_os_release``, ``ge_arch``,
``dirac_platform``) plus a thin reader that feeds it from ``/proc``, ``/etc``
or :mod:`platform`, so the rules can be tested with sample texts and the
readers on the machine itself.

Naming follows the two systems the rest of the project copies:
Grid Engine's ``arch`` values (``lx-amd64``, ``lx-arm64``, ...; see
``arch`` in complex(5) / ``$SGE_ROOT/util/arch``) and DIRAC's platform
strings (``x86_64-el9``: machine, then the OS family and major version).
"""

from __future__ import annotations

import os
import platform as _platform
import shlex
import socket
from dataclasses import dataclass, replace
from pathlib import Path

MEMINFO = Path("/proc/meminfo")
OS_RELEASE = (Path("/etc/os-release"), Path("/usr/lib/os-release"))

# Grid Engine's names for Linux machines (util/arch in the SGE sources).
# Keys are normalised `uname -m` values.
_GE_LINUX_ARCH = {
    "x86_64": "lx-amd64",
    "aarch64": "lx-arm64",
    "i386": "lx-x86",
    "i486": "lx-x86",
    "i586": "lx-x86",
    "i686": "lx-x86",
    "ppc64le": "lx-ppc64le",
    "ppc64": "lx-ppc64",
    "s390x": "lx-s390x",
    "riscv64": "lx-riscv64",
    "armv7l": "lx-arm",
    "armv6l": "lx-arm",
}

# `uname -m` spells the same machine differently across systems; DIRAC
# platforms and the table above use the Linux kernel spelling.
_MACHINE_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}

# Distributions that are rebuilds of RHEL even when ID_LIKE is missing or
# odd. Fedora is *not* here: its release numbers are not EL majors.
_RHEL_IDS = {"rhel", "centos", "almalinux", "rocky", "ol", "scientific", "cloudlinux", "eurolinux", "circle", "navy"}


@dataclass(frozen=True)
class Memory:
    """Memory figures in bytes, as the Matcher's ``load`` wants them."""

    mem_total: int
    mem_free: int
    swap_total: int


@dataclass(frozen=True)
class NodeInfo:
    """What the pilot knows about its node; static parts plus a load sample."""

    host: str
    cores: int
    arch: str
    platform: str
    mem_total: int
    mem_free: int
    swap_total: int
    load_avg: float

    def sampled(self) -> NodeInfo:
        """The same node with a fresh load sample (free memory, load average).
        The static parts are probed once: the host name alone may ask the
        resolver, which a request for jobs should not wait on."""
        return replace(self, mem_free=read_memory().mem_free, load_avg=load_average())

    def load(self) -> dict[str, int | float | str]:
        """The ``load`` object of the request-job body (INTERFACE contract)."""
        return {
            "num_proc": self.cores,
            "mem_total": self.mem_total,
            "mem_free": self.mem_free,
            "swap_total": self.swap_total,
            "arch": self.arch,
            "load_avg": self.load_avg,
            "np_load_avg": np_load_avg(self.load_avg, self.cores),
        }


def normalise_machine(machine: str) -> str:
    """``uname -m`` in the Linux kernel spelling (amd64 -> x86_64, arm64 -> aarch64)."""
    m = machine.strip().lower()
    return _MACHINE_ALIASES.get(m, m)


def cpu_count() -> int:
    """Cores this process may run on.

    The affinity mask is what a batch system's cpuset actually grants the
    pilot, so it wins over the machine's total when available.
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parse_meminfo(text: str) -> Memory:
    """Turn ``/proc/meminfo`` text into bytes.

    ``MemAvailable`` (kernel >= 3.14) is the kernel's own estimate of what a
    new job can get without swapping, so it is what ``mem_free`` means to a
    scheduler; older kernels get the classic MemFree + Buffers + Cached.
    """
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        if not sep:
            continue
        parts = rest.split()
        if not parts:
            continue
        try:
            number = int(parts[0])
        except ValueError:
            continue
        unit = parts[1].lower() if len(parts) > 1 else ""
        values[key.strip()] = number * 1024 if unit == "kb" else number
    total = values.get("MemTotal", 0)
    if "MemAvailable" in values:
        free = values["MemAvailable"]
    else:
        free = values.get("MemFree", 0) + values.get("Buffers", 0) + values.get("Cached", 0)
    return Memory(mem_total=total, mem_free=min(free, total) if total else free, swap_total=values.get("SwapTotal", 0))


def read_memory(path: Path = MEMINFO) -> Memory:
    """Memory of this node; zeros where ``/proc`` is missing (non-Linux)."""
    try:
        return parse_meminfo(path.read_text())
    except OSError:
        return Memory(0, 0, 0)


def load_average() -> float:
    """One-minute load average (Grid Engine's ``load_avg``)."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return 0.0


def np_load_avg(load: float, cores: int) -> float:
    """Load per core (Grid Engine's ``np_load_avg``)."""
    return load / cores if cores > 0 else load


def ge_arch(machine: str, system: str = "Linux") -> str:
    """Grid Engine ``arch`` name for a ``uname -m`` / ``uname -s`` pair."""
    m = normalise_machine(machine)
    s = system.strip().lower()
    if s == "linux":
        return _GE_LINUX_ARCH.get(m, f"lx-{m}")
    if s == "darwin":
        return {"x86_64": "darwin-x64", "aarch64": "darwin-arm64"}.get(m, f"darwin-{m}")
    if s in ("sunos", "solaris"):
        return {"x86_64": "sol-amd64", "i86pc": "sol-x86"}.get(m, f"sol-{m}")
    return f"{s}-{m}"


def parse_os_release(text: str) -> dict[str, str]:
    """Parse os-release(5): KEY=value lines with shell quoting."""
    result: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, raw = line.partition("=")
        try:
            words = shlex.split(raw)
        except ValueError:
            words = [raw.strip("\"'")]
        result[key.strip()] = " ".join(words)
    return result


def read_os_release(paths: tuple[Path, ...] = OS_RELEASE) -> dict[str, str]:
    """The first readable os-release file, parsed; empty when none exists."""
    for path in paths:
        try:
            return parse_os_release(path.read_text())
        except OSError:
            continue
    return {}


def _major(version: str) -> str:
    return version.split(".")[0].strip() if version else ""


def dirac_platform(machine: str, os_release: dict[str, str], system: str = "Linux") -> str:
    """DIRAC-style platform: ``x86_64-el9``, ``x86_64-debian12``, ``aarch64-ubuntu22``.

    RHEL and its rebuilds (by ID, or ``rhel`` in ID_LIKE) are all ``el<major>``
    because that is what sites publish and jobs ask for; any other
    distribution is ``<id><major>``. Without os-release the OS name stands
    alone (``x86_64-linux``).
    """
    m = normalise_machine(machine)
    os_id = os_release.get("ID", "").strip().lower()
    like = os_release.get("ID_LIKE", "").lower().split()
    major = _major(os_release.get("VERSION_ID", ""))
    # Amazon Linux claims ID_LIKE="centos rhel fedora" but its numbering
    # (2, 2023) is not an EL major, so it keeps its own name.
    if os_id != "amzn" and (os_id in _RHEL_IDS or "rhel" in like):
        family = "el"
    elif os_id:
        family = os_id
    else:
        family = system.strip().lower() or "unknown"
    return f"{m}-{family}{major}"


def hostname() -> str:
    """Fully qualified host name, falling back to the short one."""
    name = socket.getfqdn()
    return name if name and name != "localhost" else socket.gethostname()


def probe_node(platform: str | None = None) -> NodeInfo:
    """Measure this node now. ``platform`` overrides the probed one."""
    machine = _platform.machine()
    system = _platform.system()
    cores = cpu_count()
    mem = read_memory()
    return NodeInfo(
        host=hostname(),
        cores=cores,
        arch=ge_arch(machine, system),
        platform=platform or dirac_platform(machine, read_os_release(), system),
        mem_total=mem.mem_total,
        mem_free=mem.mem_free,
        swap_total=mem.swap_total,
        load_avg=load_average(),
    )
