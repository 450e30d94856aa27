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
from wms.core.complexes import ComplexTable, parse_value
from wms.core.errors import InvalidInput
from wms.core.optimizers import ChainEnv, Executor, build_chain
from wms.core.resources import Resources
from wms.db.engine import PoolOptions, make_engine
from wms.services import stored_objects
from wms.services.caches import Caches
from wms.services.oidc import Verifier

# The stored-object kind of the complex table (qconf -Mc), and how often a
# process looks whether another process stored a newer one.
COMPLEXES_KIND = "complexes"
COMPLEXES_SYNC_INTERVAL = 1.0


@dataclass
class Runtime:
    config: Config
    engine: Engine
    chain: list[Executor]
    _resources: dict[str | None, Resources] = field(default_factory=dict)
    # What this process keeps between requests (services/caches.py); a new
    # configuration means a new Runtime, so nothing outlives the
    # configuration it was computed from.
    caches: Caches = field(default_factory=Caches)
    _complexes: Any = None
    # The verifier of OpenID Connect access tokens, with the issuers' keys it keeps (services/oidc.py).
    oidc: Verifier | None = None

    @classmethod
    def create(cls, config: Config, engine: Engine | None = None) -> "Runtime":
        """A runtime for ``config``; refuses a configuration whose Grid Engine values do not read."""
        chain = build_chain(list(config.settings.optimizers))
        runtime = cls(config=config, engine=None, chain=chain)
        check_complex_values(config, runtime.configured_complexes)
        runtime.engine = engine if engine is not None else make_engine(
            config.settings.database_url, statement_timeout=config.settings.limits.statement_timeout,
            pool=PoolOptions(**config.settings.database_pool.model_dump()),
        )
        runtime.caches.verified_tokens.ttl = float(config.settings.token_cache_seconds)
        runtime.oidc = Verifier(config.settings.identity_providers, config.settings.identity_provider_checks)
        return runtime

    def resources_for(self, vo: str | None) -> Resources:
        """The Resources view of one VO (VO-specific parameters applied), cached."""
        view = self._resources.get(vo)
        if view is None:
            view = self._resources[vo] = self.config.make_resources(vo)
        return view

    def read_stored_complexes(self) -> ComplexTable:
        """The complex table in force, for every reader in one place.

        cluster.yaml's (with the built-ins) until a manager stores one with
        ``qconf -Mc``; from then on the stored table, which this process
        looks for at most once per COMPLEXES_SYNC_INTERVAL with one small
        read (WAL readers on SQLite never block, so a caller inside a
        transaction may read it too). A method, not an attribute: it may
        read the database and adopt a new table, so a caller reads it once
        and passes the table on rather than asking in a loop.
        """
        if self.engine is not None:
            row = stored_objects.changed(self, COMPLEXES_KIND, COMPLEXES_SYNC_INTERVAL)
            if row is not None:
                self.use_complexes(ComplexTable.parse(row["text"], source="stored complex table"))
                stored_objects.adopted(self, COMPLEXES_KIND, row["version"])
        if self._complexes is None:
            self._complexes = self.configured_complexes
        return self._complexes

    @property
    def configured_complexes(self) -> ComplexTable:
        """The built-in attributes plus cluster.yaml's: what start-up checks the configuration against."""
        entries = [c.model_dump() if hasattr(c, "model_dump") else dict(c) for c in self.config.cluster.complexes]
        try:
            return ComplexTable.with_user_complexes(entries)
        except InvalidInput as exc:
            raise self.config.error("cluster.yaml", ("complexes",), str(exc)) from None

    def use_complexes(self, table: ComplexTable) -> None:
        """Adopt a new complex table (qconf -Mc): everything derived from the old one goes."""
        self._complexes = table
        self.caches.complex_table_changed()

    def chain_env(self, now: datetime) -> ChainEnv:
        return ChainEnv(
            settings=self.config.settings,
            operations=self.config.operations,
            cluster=self.config.cluster,
            resources_for=self.resources_for,
            parameter_types=self.config.parameter_types,
            complexes=self.read_stored_complexes(),
            now=now,
        )


def check_complex_values(config: Config, table: ComplexTable) -> None:
    """Every complex_values entry names a known attribute and reads in its type.

    Checked at start-up so that a typo in cluster.yaml or resources.yaml
    stops the service with file and line, not a pilot's request later.
    """
    places: list[tuple[str, tuple, dict]] = [
        ("cluster.yaml", ("global", "complex_values"), dict(config.cluster.global_.complex_values)),
    ]
    for host, entry in config.cluster.hosts.items():
        places.append(("cluster.yaml", ("hosts", host, "complex_values"), dict(entry.complex_values)))

    def walk(node: Any, path: tuple) -> None:
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            if key == "complex_values" and isinstance(value, dict):
                places.append(("resources.yaml", ("Sites", *path, key), value))
            elif isinstance(value, dict):
                walk(value, (*path, key))

    walk(config.resources, ())
    for file_name, path, values in places:
        for name, raw in values.items():
            cx = table.get(name)
            if cx is None:
                raise config.error(file_name, (*path, name), f"unknown complex attribute {name!r} "
                                   "(define it under complexes in cluster.yaml)")
            try:
                parse_value(cx, raw)
            except InvalidInput as exc:
                raise config.error(file_name, (*path, name), exc.message) from None
