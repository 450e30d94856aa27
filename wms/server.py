"""Starting the service: `wms server` (API only) and `wms up` (embedded).

`wms up` is the all-in-one of a laptop: it migrates the database, writes a
manager token for the local user to ~/.config/wms/token (when the one
there does not open this database), and serves the API. Configuration
errors stop it before anything starts.
"""

from __future__ import annotations

import getpass
import os
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

from agents import site_director
from agents.registry import AGENTS
from agents.scheduler import Scheduler
from wms.token_file import token_file, write_token_file
from wms.config import config_dir_from_env, load_config
from wms.config.loader import ENV_CONFIG
from wms.core.errors import ConfigError, Unauthorized, WmsError
from wms.core.identity import Identity
from wms.db.migrate import upgrade
from wms.services.pilots import make_launcher
from wms.services import quotas as quotas_service
from wms.services.runtime import Runtime
from wms.services.tokens import authenticate, create_token, default_lifetime


def client_host(host: str) -> str:
    """The address clients use for a bind address (a wildcard means this machine)."""
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def parse_bind(bind: str) -> tuple[str, int]:
    host, sep, port = bind.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"bind must be HOST:PORT, got {bind!r}")
    return host, int(port)


def local_manager(runtime: Runtime) -> Identity:
    """The local user as manager; group and VO from cluster.yaml when it knows the user."""
    user = getpass.getuser()
    known = runtime.config.cluster.users.get(user)
    group = known.group if known else "wms_admin"
    vo = known.vo if known else "wms"
    return Identity(user=user, group=group, vo=vo, role="manager")


def ensure_local_token(runtime: Runtime, path: Path | None = None) -> Path:
    """Keep a manager token that opens this database at ``path``."""
    path = path or token_file()
    now = datetime.now(timezone.utc)
    try:
        authenticate(runtime.engine, path.read_text().strip(), now)
        return path
    except (FileNotFoundError, Unauthorized):
        pass
    identity = local_manager(runtime)
    token = create_token(runtime.engine, identity, now, description="wms up: local manager",
                         lifetime=default_lifetime(runtime.config.settings, identity.role))
    return write_token_file(token, path)


def worker_app():
    """The API of one worker process of `wms server --workers N`: each builds
    its own runtime from the environment ``serve`` set (WMS_CONFIG and the
    database settings), so workers share nothing but the database."""
    from wms.api.app import create_app
    from wms.api.guard import REQUEST_THREAD_STACK

    threading.stack_size(REQUEST_THREAD_STACK)    # as serve() does: see there
    _no_delay_on_shared_sockets()
    return create_app(Runtime.create(load_config(config_dir_from_env(None))))


def _no_delay_on_shared_sockets() -> None:
    """Turn Nagle's algorithm off on every connection a worker accepts.

    The listening socket uvicorn shares with its workers is made with
    protocol 0, so asyncio does not recognise the connections accepted on it
    as TCP and leaves Nagle on; with the client's delayed acknowledgements
    every answer then waited about 40 ms (measured: 48 ms p50 with one pilot,
    against 3.4 ms with a single process). asyncio sets TCP_NODELAY through
    this one function: widen its test to any IPv4/IPv6 stream socket.
    """
    import asyncio.base_events as base_events
    import socket

    def set_nodelay(sock: socket.socket) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    base_events._set_nodelay = set_nodelay  # type: ignore[attr-defined]


def serve(config_dir: str | None, bind: str | None, *, embedded: bool, workers: int = 1) -> int:
    import uvicorn

    from wms.api.app import create_app
    from wms.api.guard import REQUEST_THREAD_STACK

    # Threads started from here on (the ones that run requests among them)
    # get a stack deep enough for any text the input limits let through.
    threading.stack_size(REQUEST_THREAD_STACK)

    try:
        config = load_config(config_dir_from_env(config_dir))
        host, port = parse_bind(bind or config.settings.bind)
        runtime = Runtime.create(config)
        # A bad config/rqs file stops start-up.
        quotas_service.read_rule_set_files(runtime, runtime.configured_complexes)
        if embedded:
            upgrade(runtime.engine)
            token_path = ensure_local_token(runtime)
            print(f"wms up: manager token for {getpass.getuser()} in {token_path}", file=sys.stderr)
    except WmsError as exc:
        print(f"wms: {exc}", file=sys.stderr)
        return 1
    shown = f" with {workers} worker processes" if workers > 1 and not embedded else ""
    print(f"wms: serving http://{host}:{port}/api/v1{shown} (OpenAPI at /docs)", file=sys.stderr)
    scheduler = None
    if embedded:
        # The embedded default's local computing element: the SiteDirector
        # starts pilots as local processes that talk to this server.
        launcher = make_launcher(runtime, url=f"http://{client_host(host)}:{port}",
                                 log_dir=Path(config.settings.pilot_log_dir))
        scheduler = Scheduler(runtime, agents={**AGENTS, "site_director": site_director.agent(launcher)})
    if scheduler is not None:
        scheduler.start()
        print(f"wms up: agents in-process: {', '.join(sorted(scheduler.agents))}", file=sys.stderr)
    try:
        # Behind a TLS reverse proxy, X-Forwarded-For/-Proto are believed from
        # forwarded_allow_ips only (docs/deployment.md, "Behind TLS").
        options = dict(host=host, port=port, log_level="warning", proxy_headers=True,
                       forwarded_allow_ips=config.settings.forwarded_allow_ips)
        if workers > 1 and not embedded:
            # uvicorn's supervisor starts the workers (spawned: they build
            # their runtimes afresh) and restarts one that dies.
            os.environ[ENV_CONFIG] = str(Path(config_dir_from_env(config_dir)).resolve())
            runtime.engine.dispose()
            uvicorn.run("wms.server:worker_app", factory=True, workers=workers, **options)
        else:
            uvicorn.run(create_app(runtime), **options)
    finally:
        if scheduler is not None:
            scheduler.stop()
    return 0


def run_agents(config_dir: str | None) -> int:
    """`wms agents`: the periodic agents in this process, until Ctrl-C."""
    try:
        runtime = Runtime.create(load_config(config_dir_from_env(config_dir)))
    except WmsError as exc:
        print(f"wms: {exc}", file=sys.stderr)
        return 1
    scheduler = Scheduler(runtime, agents={**AGENTS, "site_director": site_director.agent()})
    # Ctrl-C is a clean stop from the moment "running" is announced: the
    # announcement comes after the start, inside the handler's reach.
    try:
        scheduler.start()
        print(f"wms agents: running {', '.join(sorted(scheduler.agents))} (Ctrl-C stops)", file=sys.stderr)
        while scheduler.is_alive():
            scheduler.join(timeout=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        scheduler.stop()
        if scheduler.ident is not None:
            scheduler.join(timeout=10)
    return 0
