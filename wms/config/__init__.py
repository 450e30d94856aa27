"""The configuration directory (INTERFACE.md, "Configuration directory").

``load_config(directory)`` reads wms.yaml, resources.yaml, cluster.yaml and
operations.yaml, checks them and returns a frozen ``Config``; a problem
raises ``wms.core.errors.ConfigError`` naming ``file:line``.
"""

from __future__ import annotations

from wms.config.loader import (
    CONFIG_FILES,
    Config,
    config_dir_from_env,
    load_config,
)
from wms.config.models import (
    AGENT_PERIOD_DEFAULTS,
    BUILTIN_PARAMETER_TYPES,
    ClusterConfig,
    OperationsConfig,
    Settings,
)
from wms.config.yamlfile import load_yaml_with_lines

__all__ = [
    "AGENT_PERIOD_DEFAULTS",
    "BUILTIN_PARAMETER_TYPES",
    "CONFIG_FILES",
    "ClusterConfig",
    "Config",
    "OperationsConfig",
    "Settings",
    "config_dir_from_env",
    "load_config",
    "load_yaml_with_lines",
]
