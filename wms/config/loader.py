"""Loading and checking the configuration directory (INTERFACE.md,
"Configuration directory": ``--config DIR``, ``WMS_CONFIG``, ``./config``).

:func:`load_config` reads the four files, checks each one completely and
returns a frozen :class:`Config`. Any problem raises ConfigError whose
``where`` is ``file:line``, so nothing starts on a wrong configuration.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_settings import EnvSettingsSource
from pydantic_settings.exceptions import SettingsError

from wms.config.models import (
    ClusterConfig,
    OperationsConfig,
    Problem,
    ResourcesFile,
    Settings,
    check_sites,
    merged_parameter_types,
)
from wms.config.yamlfile import KeyPath, dotted_path, line_of, load_yaml_with_lines
from wms.core.errors import ConfigError
from wms.core.pilot_backends import missing_backend_parameters
from wms.core.resources import Resources

WMS_FILE = "wms.yaml"
RESOURCES_FILE = "resources.yaml"
CLUSTER_FILE = "cluster.yaml"
OPERATIONS_FILE = "operations.yaml"
CONFIG_FILES = (WMS_FILE, RESOURCES_FILE, CLUSTER_FILE, OPERATIONS_FILE)

ENV_CONFIG = "WMS_CONFIG"
# Every wms.yaml key may be given in the environment as WMS_<KEY>, a nested
# one as WMS_<KEY>__<SUBKEY> (WMS_LIMITS__EVALUATION_MS), a list or mapping
# as JSON; the environment wins over wms.yaml, as container deployments expect.
ENV_PREFIX = "WMS_"
ENV_NESTING = "__"
DEFAULT_CONFIG_DIR = "config"


@dataclass(frozen=True)
class Config:
    """The loaded configuration directory.

    ``settings`` is wms.yaml, ``resources`` the validated content of the
    ``Sites`` mapping of resources.yaml as plain dicts (what
    :class:`wms.core.resources.Resources` takes), ``cluster`` cluster.yaml,
    ``operations`` operations.yaml. ``lines`` keeps, per file name, the
    line of every key path, so later checks can name ``file:line`` too.
    """

    directory: Path
    settings: Settings
    resources: dict[str, Any]
    cluster: ClusterConfig
    operations: OperationsConfig
    lines: Mapping[str, Mapping[KeyPath, int]] = field(default_factory=dict, repr=False)

    @property
    def parameter_types(self) -> dict[str, str]:
        """How each Requirements parameter compares: the built-in table
        (CPUTime number, Tags list, ...) overridden by operations.yaml
        JobDescription.Parameters."""
        return merged_parameter_types(self.operations.JobDescription.Parameters)

    @cached_property
    def pool_map_fingerprint(self) -> str:
        """A digest of what the SubmitPool-to-queue map is computed from (the
        Sites of resources.yaml and the parameter types): two processes with
        equal digests compute the same map."""
        text = json.dumps({"sites": self.resources, "types": self.parameter_types}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def make_resources(self, vo: str | None = None) -> Resources:
        """The Resources helper over this configuration, as seen by ``vo``."""
        return Resources(self.resources, vo=vo)

    def where(self, file_name: str, path: KeyPath = ()) -> str:
        """``config/cluster.yaml:12``: where a key path of a file starts."""
        lines = self.lines.get(file_name, {})
        return f"{self.directory / file_name}:{line_of(dict(lines), tuple(path))}"

    def error(self, file_name: str, path: KeyPath, message: str) -> ConfigError:
        """A ConfigError for a key path of a file, in the loader's format."""
        text = f"{dotted_path(tuple(path))}: {message}" if path else message
        return ConfigError(text, where=self.where(file_name, path))


def config_dir_from_env(
    cli_value: str | Path | None, environ: Mapping[str, str] | None = None
) -> Path:
    """The configuration directory: ``--config DIR``, else ``$WMS_CONFIG``,
    else ``./config``."""
    env = os.environ if environ is None else environ
    if cli_value:
        return Path(cli_value)
    if env.get(ENV_CONFIG):
        return Path(env[ENV_CONFIG])
    return Path(DEFAULT_CONFIG_DIR)


# -- error reporting ---------------------------------------------------------------
def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _describe(error: Mapping[str, Any]) -> str:
    kind = error["type"]
    got = error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        return "unknown key (check its spelling; docs/configuration.md lists every key)"
    if kind in {"int_parsing", "int_type", "int_from_float"}:
        return f"expected an integer, got {_short(got)}"
    if kind in {"float_parsing", "float_type"}:
        return f"expected a number, got {_short(got)}"
    if kind in {"string_type"}:
        return f"expected a string, got {_short(got)}"
    if kind in {"dict_type", "model_type", "model_attributes_type"}:
        return f"expected a mapping, got {_short(got)}"
    if kind in {"list_type", "tuple_type"}:
        return f"expected a list, got {_short(got)}"
    if kind == "greater_than":
        return f"must be greater than {ctx.get('gt')}, got {_short(got)}"
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}, got {_short(got)}"
    if kind == "less_than_equal":
        return f"must be at most {ctx.get('le')}, got {_short(got)}"
    if kind == "too_short":
        return "must not be empty"
    if kind == "literal_error":
        return f"expected one of {ctx.get('expected')}, got {_short(got)}"
    if kind in {"value_error", "assertion_error"}:
        return str(ctx.get("error", error["msg"]))
    return f"{error['msg']}, got {_short(got)}"


def _problem_from(error: Mapping[str, Any], lines: Mapping[KeyPath, int]) -> tuple[KeyPath, str]:
    """Turn a pydantic error into (key path, message), dropping the parts of
    its location that are not keys of the file (union tags, '[key]')."""
    path: KeyPath = ()
    loc = tuple(error["loc"])
    for position, part in enumerate(loc):
        if part == "[key]":
            continue
        candidate = path + (part,)
        if candidate in lines or position == len(loc) - 1:
            path = candidate
    return path, _describe(error)


class _FileReport:
    def __init__(self, where: str, lines: Mapping[KeyPath, int]) -> None:
        self.where = where
        self.lines = lines

    def raise_problems(self, problems: list[Problem]) -> None:
        if not problems:
            return
        ordered = sorted(problems, key=lambda p: line_of(dict(self.lines), p[0]))
        path, message = ordered[0]
        line = line_of(dict(self.lines), path)
        text = f"{dotted_path(path)}: {message}" if path else message
        if len(ordered) > 1:
            text += f" (and {len(ordered) - 1} more problem{'s' if len(ordered) > 2 else ''})"
        raise ConfigError(text, where=f"{self.where}:{line}")

    def validate(self, model: type[BaseModel], data: Any) -> Any:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            self.raise_problems([_problem_from(err, self.lines) for err in exc.errors()])
        raise AssertionError("unreachable")


def _read(directory: Path, name: str) -> tuple[dict[str, Any], dict[KeyPath, int], _FileReport]:
    path = directory / name
    if not path.exists():
        return {}, {(): 1}, _FileReport(str(path), {(): 1})
    if not path.is_file():
        raise ConfigError("not a regular file", where=str(path))
    data, lines = load_yaml_with_lines(path)
    report = _FileReport(str(path), lines)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        report.raise_problems([((), f"the file must hold a mapping of keys, got {_short(data)}")])
    return data, lines, report


# -- the environment -----------------------------------------------------------------
def environment_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """The wms.yaml keys ``env`` gives (WMS_<KEY>, WMS_<KEY>__<SUBKEY>), as nested
    mappings, read by pydantic-settings' environment source; an empty variable gives nothing."""
    given = {name.lower(): value for name, value in env.items() if value}
    try:
        return _read_environment(given)
    except SettingsError as exc:
        # A list or mapping that is not JSON: the variable is the one that fails on its own.
        culprit = next((name for name in sorted(given) if not _reads_alone(name, given[name])), "")
        raise ConfigError(f"expected JSON for a list or mapping: {exc.__cause__ or exc}",
                          where=culprit.upper()) from None


def _read_environment(env_vars: dict[str, str]) -> dict[str, Any]:
    source = EnvSettingsSource(Settings, case_sensitive=False, env_prefix=ENV_PREFIX,
                               env_nested_delimiter=ENV_NESTING)
    source.env_vars = env_vars
    return source()


def _reads_alone(name: str, value: str) -> bool:
    try:
        _read_environment({name: value})
    except SettingsError:
        return False
    return True


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over``'s keys put in, nested mappings merged key by key."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def _variable_of(path: KeyPath, given: Mapping[str, Any]) -> str | None:
    """The environment variable that gave the key at ``path``, if one did."""
    node: Any = given
    for depth, key in enumerate(path):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
        if not isinstance(node, Mapping):
            return ENV_PREFIX + ENV_NESTING.join(str(k) for k in path[:depth + 1]).upper()
    return None


# -- loading -------------------------------------------------------------------------
def load_config(
    directory: str | Path, environ: Mapping[str, str] | None = None
) -> Config:
    """Load and check the configuration directory (INTERFACE.md).

    The directory must exist; each of wms.yaml, resources.yaml,
    cluster.yaml and operations.yaml is optional (a missing or empty file
    means all defaults). Each wms.yaml key given in ``environ`` (default:
    the process environment) as WMS_<KEY> overrides wms.yaml
    (environment_settings).
    Raises ConfigError with ``where="file:line"`` on the first problem.
    """
    env = os.environ if environ is None else environ
    root = Path(directory)
    if not root.exists():
        # Said in full: a command run outside the repository looks for ./config and should say where else to look.
        raise ConfigError(f"configuration directory not found (looked in {root.absolute()}); give --config DIR "
                          f"or set {ENV_CONFIG}", where=str(root))
    if not root.is_dir():
        raise ConfigError("not a directory", where=str(root))

    all_lines: dict[str, Mapping[KeyPath, int]] = {}

    data, lines, report = _read(root, WMS_FILE)
    all_lines[WMS_FILE] = lines
    given = environment_settings(env)
    try:
        settings = Settings.model_validate(_merged(data, given))
    except ValidationError as exc:
        for err in exc.errors():
            variable = _variable_of(tuple(part for part in err["loc"] if part != "[key]"), given)
            if variable is not None:
                raise ConfigError(_describe(err), where=variable) from None
        report.raise_problems([_problem_from(err, lines) for err in exc.errors()])
        raise

    data, lines, report = _read(root, OPERATIONS_FILE)
    all_lines[OPERATIONS_FILE] = lines
    operations = report.validate(OperationsConfig, data)
    report.raise_problems(operations.problems())

    data, lines, report = _read(root, CLUSTER_FILE)
    all_lines[CLUSTER_FILE] = lines
    cluster = report.validate(ClusterConfig, data)
    report.raise_problems(cluster.problems())

    data, lines, report = _read(root, RESOURCES_FILE)
    all_lines[RESOURCES_FILE] = lines
    resources_file = report.validate(ResourcesFile, data)
    types = merged_parameter_types(operations.JobDescription.Parameters)
    sites, problems = check_sites(resources_file.Sites, types, cluster.usersets)
    report.raise_problems(problems)
    report.raise_problems(missing_backend_parameters(sites))

    return Config(
        directory=root,
        settings=settings,
        resources=sites,
        cluster=cluster,
        operations=operations,
        lines=all_lines,
    )
