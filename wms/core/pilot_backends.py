"""The computing-element backends a queue may name in resources.yaml, and
the checks of their queue parameters at configuration load.

``Backend`` names one of :data:`BACKEND_NAMES` (the classes are in
wms/services/computing_elements.py). The ``slurm`` backend reads three
more parameters:

* ``Partition``: the Slurm partition (``sbatch --partition``);
* ``SlurmOptions``: further sbatch options, one string split like a shell
  line, every word an option (``--time=02:00:00 --mem=2G``), none of those
  the backend sets itself;
* ``SlurmConf``: the absolute path of the cluster's slurm.conf (else the
  SiteDirector's SLURM_CONF, else Slurm's default).
"""

from __future__ import annotations

import shlex
from typing import Any, Callable

BACKEND_NAMES = ("local", "slurm")

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


def _slurm_conf(value: Any) -> str | None:
    if not isinstance(value, str) or not value.startswith("/"):
        return f"expected the absolute path of a slurm.conf, got {value!r}"
    return None


_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "backend": _backend,
    "partition": _partition,
    "slurmoptions": _slurm_options,
    "slurmconf": _slurm_conf,
}


def backend_parameter_problem(name: str, value: Any) -> str | None:
    """What is wrong with a backend parameter's value (``name`` any case), or None."""
    check = _CHECKS.get(name.casefold())
    return check(value) if check is not None else None
