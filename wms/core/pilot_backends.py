"""The computing-element backends a queue may name in resources.yaml, and
the checks of their queue parameters at configuration load.

``Backend`` names one of :data:`BACKEND_NAMES` (the classes are in
wms/backends/base.py). The ``slurm`` backend reads three
more parameters:

* ``Partition``: the Slurm partition (``sbatch --partition``);
* ``SlurmOptions``: further sbatch options, one string split like a shell
  line, every word an option (``--time=02:00:00 --mem=2G``), none of those
  the backend sets itself;
* ``SlurmConf``: the absolute path of the cluster's slurm.conf (else the
  SiteDirector's SLURM_CONF, else Slurm's default).

The ``ssh`` backend reads ``SSHHost``, ``SSHUser``, ``SSHPort``, ``SSHKey``
and ``SSHKnownHosts`` (absolute paths on the SiteDirector's host) and
``SSHDirectory`` (on the node).

The ``arc`` backend (an ARC CE's A-REX, through its REST interface) reads
``ARCEndpoint`` (the A-REX URL, ``https://host:port/arex``), the
SiteDirector's credential as absolute paths on its host
(``ARCCertificate`` and ``ARCKey``, or ``ARCProxy``, and/or
``ARCTokenFile``), how it checks the CE's certificate (``ARCCAFile`` or
``ARCCADirectory``, else the system's CAs), ``ARCQueue`` (the CE's queue)
and ``ARCRSL`` (more xRSL relations, wms.core.xrsl).

Every backend's pilots take the queue's payload isolation
(:data:`PILOT_OPTIONS`, pilot/isolation.py): ``Isolation`` (``bubblewrap``,
``apptainer`` or ``none``), ``IsolationPaths`` (more read-only paths),
``IsolationCommand`` and ``IsolationImage`` (Apptainer), ``IfNoIsolation``
(``owner`` or ``run``) and ``JobEnv`` (more of the pilot's environment for
its payloads).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any, Callable

from wms.core import xrsl
from wms.core.resources import CES_KEY, QUEUES_KEY

BACKEND_NAMES = ("local", "slurm", "ssh", "arc")
# The sandbox modes of wms-pilot --isolation (pilot/isolation.py MODES; a test keeps them equal).
ISOLATION_MODES = ("bubblewrap", "apptainer", "none")
NO_ISOLATION = "none"
# Queue parameters that become wms-pilot options of the queue's pilots.
PILOT_OPTIONS = {"Isolation": "--isolation", "IsolationPaths": "--isolation-paths",
                 "IsolationCommand": "--isolation-command", "IsolationImage": "--isolation-image",
                 "IfNoIsolation": "--if-no-isolation", "JobEnv": "--job-env"}
# Parameters a backend cannot do without, stated at the queue, its CE or its site.
REQUIRED_PARAMETERS = {"ssh": ("SSHHost",), "arc": ("ARCEndpoint",)}

# sbatch options the slurm backend gives itself: where the log goes, which
# environment travels, the job's name and directory, the answer's form.
# A site's SlurmOptions changing them would break the pilot's bookkeeping.
RESERVED_SBATCH_OPTIONS = frozenset({
    "--output", "-o", "--error", "-e", "--export", "--job-name", "-J", "--chdir", "-D",
    "--parsable", "--wrap", "--partition", "-p", "--array", "-a", "--wait", "-W",
})


def _backend(value: Any) -> str | None:
    if value not in BACKEND_NAMES:
        return f"unknown computing-element backend {value!r} (known: {', '.join(BACKEND_NAMES)})"
    return None


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if value not in choices:
            return f"expected one of {', '.join(choices)}, got {value!r}"
        return None

    return check


def _names(what: str, absolute: bool = False) -> Callable[[Any], str | None]:
    # A list, or one comma-separated string, of words without blanks (paths: absolute).
    def word(item: Any) -> bool:
        return (isinstance(item, str) and bool(item.strip()) and "," not in item
                and not any(c.isspace() for c in item.strip()) and (not absolute or item.strip().startswith("/")))

    def check(value: Any) -> str | None:
        items = value if isinstance(value, list) else value.split(",") if isinstance(value, str) else None
        if items is None or not all(word(item) for item in items):
            return f"expected {what} (a list, or one string with commas), got {value!r}"
        return None

    return check


def _one_line(what: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if not isinstance(value, str) or not value.strip() or "\n" in value:
            return f"expected {what} on one line, got {value!r}"
        return None

    return check


def _partition(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value):
        return f"expected a Slurm partition name (no blanks), got {value!r}"
    return None


def _slurm_options(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"expected sbatch options as one string (\"--time=02:00:00 --mem=2G\"), got {value!r}"
    try:
        words = shlex.split(value)
    except ValueError as exc:
        return f"cannot split {value!r} like a shell line: {exc}"
    for word in words:
        if not word.startswith("-"):
            return f"{word!r} is not an option: write each as --name=value"
        name = word.split("=", 1)[0]
        if name in RESERVED_SBATCH_OPTIONS or (len(name) > 2 and name[:2] in RESERVED_SBATCH_OPTIONS
                                               and not name.startswith("--")):
            return f"{name!r} is set by the slurm backend itself (log file, environment, job name) and may not be changed"
    return None


def _absolute_path(what: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if not isinstance(value, str) or not value.startswith("/"):
            return f"expected the absolute path of {what}, got {value!r}"
        return None

    return check


def _word(what: str) -> Callable[[Any], str | None]:
    # Host and user names go into an ssh destination: no blanks, no option.
    def check(value: Any) -> str | None:
        if not isinstance(value, str) or not value or value.startswith("-") or any(
                c.isspace() or c in "@/:" for c in value):
            return f"expected {what} (no blanks, '@', '/' or ':', not starting with '-'), got {value!r}"
        return None

    return check


def _port(value: Any) -> str | None:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535:
        return f"expected a TCP port (1 to 65535), got {value!r}"
    return None


def _directory(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip() or "\n" in value:
        return f"expected a directory on the node, got {value!r}"
    return None


def _arc_endpoint(value: Any) -> str | None:
    # The URL goes into every reference and request: https, a host, no query, no blanks.
    if (not isinstance(value, str) or not value.startswith("https://") or any(c.isspace() for c in value)
            or "?" in value or "#" in value or len(value) <= len("https://")):
        return f"expected the https URL of an A-REX (https://ce.example.org:443/arex), got {value!r}"
    return None


def _arc_rsl(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"expected xRSL relations as one string (\"(walltime=\"60\")(memory=\"2000\")\"), got {value!r}"
    try:
        names = xrsl.relation_attributes(value)
    except ValueError as exc:
        return f"cannot read {value!r} as xRSL relations: {exc}"
    for name in names:
        if name in xrsl.RESERVED_ATTRIBUTES:
            return f"{name!r} is set by the arc backend itself (what runs, its files, its name and queue) and may not be changed"
    return None


def _arc_queue(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip() or any(c.isspace() or c in '"()' for c in value):
        return f"expected an ARC queue name (no blanks, quotes or parentheses), got {value!r}"
    return None


_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "backend": _backend,
    "partition": _partition,
    "slurmoptions": _slurm_options,
    "slurmconf": _absolute_path("a slurm.conf"),
    "sshhost": _word("a host name"),
    "sshuser": _word("a user name"),
    "sshport": _port,
    "sshkey": _absolute_path("a private key"),
    "sshknownhosts": _absolute_path("a known_hosts file"),
    "sshdirectory": _directory,
    "arcendpoint": _arc_endpoint,
    "arccertificate": _absolute_path("a certificate (PEM)"),
    "arckey": _absolute_path("a private key (PEM)"),
    "arcproxy": _absolute_path("a proxy certificate (PEM, certificate and key)"),
    "arccafile": _absolute_path("a file of CA certificates (PEM)"),
    "arccadirectory": _absolute_path("a directory of CA certificates"),
    "arctokenfile": _absolute_path("a file holding a token"),
    "arcqueue": _arc_queue,
    "arcrsl": _arc_rsl,
    "isolation": _one_of(*ISOLATION_MODES),
    "isolationpaths": _names("absolute paths", absolute=True),
    "isolationcommand": _one_line("a command template"),
    "isolationimage": _one_line("a container image"),
    "ifnoisolation": _one_of("owner", "run"),
    "jobenv": _names("environment variable names (NAME or PREFIX_*)"),
}


def backend_parameter_problem(name: str, value: Any) -> str | None:
    """What is wrong with a backend parameter's value (``name`` any case), or None."""
    check = _CHECKS.get(name.casefold())
    return check(value) if check is not None else None


def missing_backend_parameters(sites: Mapping[str, Any], path: tuple = ("Sites",)) -> list[tuple[tuple, str]]:
    """Queues whose backend (queue > CE > site, without VO blocks) lacks a
    parameter it needs, as (key path of the queue, message)."""
    problems = []
    for site, site_node in sites.items():
        for ce, ce_node in site_node.get(CES_KEY, {}).items():
            for queue, queue_node in ce_node.get(QUEUES_KEY, {}).items():
                levels = (queue_node, ce_node, site_node)
                backend = _effective(levels, "Backend") or "local"
                for name in REQUIRED_PARAMETERS.get(backend, ()):
                    if _effective(levels, name) is None:
                        problems.append(((*path, site, CES_KEY, ce, QUEUES_KEY, queue),
                                         f"Backend {backend} needs {name} (at the queue, its CE or its site)"))
    return problems


def _effective(levels: tuple[Mapping[str, Any], ...], name: str) -> Any:
    folded = name.casefold()
    for level in levels:
        for key, value in level.items():
            if isinstance(key, str) and key.casefold() == folded:
                return value
    return None
