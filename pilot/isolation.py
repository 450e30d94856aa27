"""The sandbox a payload runs in: what it sees of the node, and how it is made.

A pilot runs strangers' code under its own Unix identity. Without a wall
between them, a payload reads the pilot's token, the other jobs'
directories and every file of the pilot's user. So each job runs inside
a sandbox made by an unprivileged container tool (docs/security.md,
"The worker node"):

``bubblewrap`` (the default)
    ``bwrap`` with every namespace of its own but the network: its own PID
    namespace (the pilot, its watchdog and the other jobs are invisible;
    when the sandbox's first process ends the kernel ends all the others),
    a root of its own holding only the system's read-only directories
    (:data:`SYSTEM_PATHS`, the pilot's Python and the paths a site adds),
    the job's directory (the one writable place), a private /tmp, a fresh
    /proc and a minimal /dev. The pilot's token file, its state directory,
    the other jobs' directories and every user's home are not in it.
``apptainer``
    A site's container, run with a command template (``--isolation-command``,
    or the queue parameter ``IsolationCommand``): ``{job_dir}`` and
    ``{image}`` are filled in and the job's command follows. The default
    runs ``apptainer exec --containall`` (PID and IPC namespaces, clean
    environment, no home) on ``--isolation-image``; the job's environment
    goes in as ``APPTAINERENV_*`` variables, which Apptainer passes on.
``none``
    Only by explicit choice: the payload runs beside the pilot. The pilot
    says so in its log, for each job, and to the server (``wms pilots``).

Everything here is pure (argument lists from paths) but :func:`probe`, which
starts one real sandbox to find out whether the node allows it.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

BUBBLEWRAP, APPTAINER, NONE = "bubblewrap", "apptainer", "none"
MODES = (BUBBLEWRAP, APPTAINER, NONE)

# What a sandbox shows of the node, read-only: the operating system's
# programs, libraries and configuration, and the software areas grids mount.
# Homes, /root, /var, /run (sockets), /srv, /tmp and /work are left out:
# what the pilot's user keeps there is not the payload's business.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/cvmfs")

DEFAULT_APPTAINER_COMMAND = "apptainer exec --containall --no-home --bind {job_dir} --pwd {job_dir} {image}"
APPTAINER_ENV_PREFIX = "APPTAINERENV_"

# The pilot's environment a payload inherits: the locale, the search path,
# the terminal type and Slurm's description of the allocation, nothing else
# (a pilot's environment may carry secrets of the site, a cloud or an ssh
# agent). A site adds names with --job-env; the job's own Environment and
# WMS_* come on top.
INHERITED_ENV = ("PATH", "LANG", "LANGUAGE", "LC_*", "TZ", "TERM", "SLURM_*", "SLURMD_NODENAME")

# Variables that steer the dynamic loader or a shell before the program
# they start runs a single instruction of its own (glibc's list of what it
# ignores for set-user-ID programs, and the shell's own). The start of a
# sandbox (bwrap, or the gate's shell and the site's container command)
# runs outside its wall, with the pilot's rights: a job's LD_PRELOAD naming
# a library of its input sandbox would run there, and a job's PATH would
# choose which "bwrap" starts. So these processes get the pilot's own PATH
# and none of the job's values, which are set inside the sandbox instead
# (bwrap's --setenv; Apptainer's APPTAINERENV_*).
LAUNCH_ENV_PREFIXES = ("LD_", "BASH_FUNC_")
LAUNCH_ENV_NAMES = frozenset({
    "PATH", "ENV", "BASH_ENV", "IFS", "CDPATH", "SHELLOPTS", "BASHOPTS", "PS4",
    "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "MALLOC_TRACE",
    "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TMPDIR", "TZDIR",
})

PROBE_TIMEOUT = 20.0

# Where the pilot's own package is (a directory holding pilot/, or the
# zipapp the SiteDirector ships), and where a sandbox shows it, read-only:
# a payload runs ``PYTHONPATH=$WMS_PILOT_PATH python3 -m pilot.job_status``
# with its job token (the pilot's code holds no secret).
PILOT_HOME = Path(__file__).resolve().parents[1]
PILOT_PATH_ENV = "WMS_PILOT_PATH"
SANDBOX_PILOT_DIR = "/wms-pilot"


def interpreter_paths() -> tuple[str, ...]:
    """The Python the pilot runs with (its prefix and its base), so payloads
    may use that interpreter; code only, no secrets."""
    found: list[str] = []
    for prefix in (sys.base_prefix, sys.prefix):
        if prefix and not any(prefix == p or prefix.startswith(p + "/") for p in ("/usr", *found)):
            found.append(prefix)
    return tuple(found)


def _bind_args(path: str, option: str) -> list[str]:
    """One read-only path as bwrap options: a symbolic link stays one
    (merged-/usr systems have /bin -> usr/bin), a missing path is left out."""
    if os.path.islink(path):
        return ["--symlink", os.readlink(path), path]
    if os.path.exists(path):
        return [option, path, path]
    return []


@dataclass(frozen=True)
class Launch:
    """How a job's command is started: the command line and environment to
    exec, and ``args``, the options bwrap reads from the pipe its ``--args``
    names in ``argv`` (empty when there is no such pipe)."""

    argv: list[str]
    env: dict[str, str]
    args: tuple[str, ...] = ()

    def args_data(self) -> bytes:
        """``args`` as bwrap reads them: each one ended by a NUL. One holding
        a NUL is refused (ValueError, as exec refuses it): it would split
        into options of the job's choosing."""
        if any("\0" in word for word in self.args):
            raise ValueError("embedded null byte")
        return b"".join(os.fsencode(word) + b"\0" for word in self.args)


@dataclass(frozen=True)
class Isolation:
    """How this pilot runs its payloads; ``note`` says why when it is ``none``."""

    mode: str = BUBBLEWRAP
    # Extra read-only paths a site shows its payloads (--isolation-paths).
    paths: tuple[str, ...] = ()
    # The apptainer command template and image.
    command: str = DEFAULT_APPTAINER_COMMAND
    image: str = ""
    bwrap: str = "bwrap"
    note: str = ""
    # More of the pilot's environment to pass on (names; NAME_* for a prefix).
    env_names: tuple[str, ...] = field(default_factory=tuple)

    @property
    def isolated(self) -> bool:
        return self.mode != NONE

    def launch(self, argv: Sequence[str], job_dir: Path, env: Mapping[str, str], args_fd: int | None = None
               ) -> Launch:
        """How to start ``argv`` for the job in ``job_dir`` with the job's
        environment ``env``, sandboxed: what steers the start
        (:data:`LAUNCH_ENV_NAMES`) is the pilot's outside and the job's
        inside. With ``args_fd``, bwrap's options are not on its command
        line but in :attr:`Launch.args`, for the pipe ``args_fd`` (read
        end): bwrap reads them before it does anything else."""
        if self.mode == NONE:
            return Launch(list(argv), {**env, PILOT_PATH_ENV: str(PILOT_HOME)})
        outside = {k: v for k, v in env.items() if not steers_launch(k)}
        outside["PATH"] = os.environ.get("PATH") or os.defpath
        if self.mode == BUBBLEWRAP:
            inside = {**env, PILOT_PATH_ENV: pilot_path_inside()}
            settings = [word for k, v in inside.items() if steers_launch(k) for word in ("--setenv", k, v)]
            if "PATH" not in inside:
                settings += ["--unsetenv", "PATH"]
            bwrap, *options = bubblewrap_argv(job_dir, (*interpreter_paths(), *self.paths),
                                              program_path(self.bwrap))
            outside[PILOT_PATH_ENV] = inside[PILOT_PATH_ENV]
            if args_fd is None:
                return Launch([bwrap, *options, *settings, "--", *argv], outside)
            # The command stays on the command line: bwrap ignores one in its --args.
            return Launch([bwrap, "--args", str(args_fd), "--", *argv], outside, (*options, *settings))
        # --containall cleans the environment; Apptainer passes these on.
        command = command_argv(self.command, job_dir, self.image)
        command[0] = program_path(command[0])
        return Launch([*command, *argv], {**outside, **{APPTAINER_ENV_PREFIX + k: v for k, v in env.items()
                                                       if not k.startswith("APPTAINER")}})

    def describe(self) -> str:
        """One line for the pilot's log."""
        if self.mode == BUBBLEWRAP:
            extra = f", also {', '.join(self.paths)}" if self.paths else ""
            return f"bubblewrap ({self.bwrap}{extra})"
        if self.mode == APPTAINER:
            return f"apptainer ({shlex.join(command_argv(self.command, Path('{job_dir}'), self.image))})"
        return f"none: payloads run beside the pilot ({self.note})" if self.note else "none"


def bubblewrap_argv(job_dir: Path, extra_paths: Iterable[str] = (), bwrap: str = "bwrap") -> list[str]:
    """bwrap's options for one job (the command follows ``--``).

    Order matters: the private /tmp is mounted before the job's directory
    is bound into it (the pilot's work directory is usually under /tmp);
    the namespaces come first, so that options cut short (a pilot killed
    while it writes them to bwrap's --args pipe) leave no sandbox without them."""
    # No --cap-drop for a pilot run as root: dropping capabilities clears the
    # parent-death signal --die-with-parent relies on (the kernel resets it
    # on every change of credentials). A pilot should not run as root; it
    # says so at start (pilot/main.py).
    argv = [bwrap, "--unshare-all", "--share-net", "--die-with-parent"]
    for path in SYSTEM_PATHS:
        argv += _bind_args(path, "--ro-bind")
    for path in extra_paths:
        argv += _bind_args(str(path), "--ro-bind")
    job = str(job_dir)
    argv += ["--ro-bind", *pilot_package_bind()]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", job, job, "--chdir", job]
    return argv


def pilot_package_bind() -> tuple[str, str]:
    """(source, target) of the pilot's package in a sandbox: only pilot/ of a
    directory (which may hold more: a checkout, its var/), or the zipapp."""
    if PILOT_HOME.is_file():
        return str(PILOT_HOME), f"{SANDBOX_PILOT_DIR}/{PILOT_HOME.name}"
    return str(PILOT_HOME / "pilot"), f"{SANDBOX_PILOT_DIR}/pilot"


def pilot_path_inside() -> str:
    """WMS_PILOT_PATH in a sandbox: what to put on PYTHONPATH to import the pilot."""
    return f"{SANDBOX_PILOT_DIR}/{PILOT_HOME.name}" if PILOT_HOME.is_file() else SANDBOX_PILOT_DIR


def steers_launch(name: str) -> bool:
    """Whether a variable steers the start of a program (:data:`LAUNCH_ENV_NAMES`)."""
    return name in LAUNCH_ENV_NAMES or name.startswith(LAUNCH_ENV_PREFIXES)


@functools.lru_cache(maxsize=8)
def program_path(program: str) -> str:
    """A sandbox tool's absolute path, found on the pilot's own PATH once
    (never the job's); the name itself when it is not there (the probe says so)."""
    return shutil.which(program, path=os.environ.get("PATH") or os.defpath) or program


def command_argv(template: str, job_dir: Path, image: str) -> list[str]:
    """A site's command template split like a shell line, its placeholders filled."""
    return [word.replace("{job_dir}", str(job_dir)).replace("{image}", image) for word in shlex.split(template)]


def template_problem(template: str) -> str | None:
    """What is wrong with an --isolation-command template, or None."""
    try:
        words = shlex.split(template)
    except ValueError as exc:
        return f"cannot split it like a shell line: {exc}"
    if not words:
        return "it is empty"
    return None


def inherited(env: Mapping[str, str], extra_names: Iterable[str] = ()) -> dict[str, str]:
    """The part of the pilot's environment a payload gets (:data:`INHERITED_ENV`
    and the site's names; ``NAME_*`` is a prefix)."""
    patterns = (*INHERITED_ENV, *extra_names)
    exact = {p for p in patterns if not p.endswith("*")}
    prefixes = tuple(p[:-1] for p in patterns if p.endswith("*"))
    return {k: v for k, v in env.items() if k in exact or (prefixes and k.startswith(prefixes))}


def probe(isolation: Isolation, scratch: Path) -> str | None:
    """Start one real sandbox that does nothing; None if it works, else why not (one line).

    Nodes differ: bwrap may be missing, or unprivileged user namespaces
    switched off (``kernel.unprivileged_userns_clone=0``,
    ``user.max_user_namespaces=0``, an AppArmor rule)."""
    if isolation.mode == NONE:
        return None
    program = isolation.bwrap if isolation.mode == BUBBLEWRAP else command_argv(isolation.command, scratch,
                                                                                  isolation.image)[0]
    if shutil.which(program) is None:
        return f"{program} is not installed (not found on PATH)"
    launch = isolation.launch(["true"], scratch, inherited(os.environ))
    try:
        done = subprocess.run(launch.argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT,
                              env=launch.env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{program} could not be started: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return f"{program} failed ({said[-1] if said else f'exit code {done.returncode}'})"
    return None
