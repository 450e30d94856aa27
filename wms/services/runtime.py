"""What a running server holds: configuration, database engine, the
optimizer chain and per-VO views of the Resources configuration.

Built once at start-up (``Runtime.create``) and passed explicitly to every
service function, so tests build their own with a SQLite URL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from wms.config import Config
from wms.core.complexes import ComplexTable
from wms.core.optimizers import ChainEnv, Executor, build_chain
from wms.core.resources import Resources
from wms.db.engine import make_engine


@dataclass
class Runtime:
    config: Config
    engine: Engine
    chain: list[Executor]
    _resources: dict[str | None, Resources] = field(default_factory=dict)
    # The Matcher's per-configuration caches (task-queue views, static
    # verdicts); a new configuration means a new Runtime, so they never
    # outlive the configuration they were computed from.
    match_cache: dict[str, dict] = field(default_factory=dict)
    _complexes: Any = None

    @classmethod
    def create(cls, config: Config, engine: Engine | None = None) -> "Runtime":
        engine = engine if engine is not None else make_engine(config.settings.database_url)
        return cls(config=config, engine=engine, chain=build_chain(list(config.settings.optimizers)))

    def resources_for(self, vo: str | None) -> Resources:
        """The Resources view of one VO (VO-specific parameters applied), cached."""
        view = self._resources.get(vo)
        if view is None:
            view = self._resources[vo] = self.config.make_resources(vo)
        return view

    @property
    def complexes(self) -> ComplexTable:
        """The complex table: the built-in attributes plus cluster.yaml's."""
        if self._complexes is None:
            self._complexes = ComplexTable.with_user_complexes(
                [c.model_dump() if hasattr(c, "model_dump") else dict(c) for c in self.config.cluster.complexes]
            )
        return self._complexes

    def chain_env(self, now: datetime) -> ChainEnv:
        return ChainEnv(
            settings=self.config.settings,
            operations=self.config.operations,
            cluster=self.config.cluster,
            resources_for=self.resources_for,
            parameter_types=self.config.parameter_types,
            complexes=self.complexes,
            now=now,
        )
