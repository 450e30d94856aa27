"""Starting the service: `wms server` (API only) and `wms up` (embedded).

`wms up` is the all-in-one of a laptop: it migrates the database, writes a
manager token for the local user to ~/.config/wms/token (when the one
there does not open this database), and serves the API. Configuration
errors stop it before anything starts.

Start-up is honest: the configuration is read, the database answers with
the schema this code needs, and the port is bound before "serving" is
announced and before any agent starts. Any of them failing is one line on
stderr and exit status 1, with no agent or pilot left running.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import getpass
import os
import resource
import socket
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from agents import site_director
from agents.registry import AGENTS
from agents.scheduler import Scheduler
from wms.token_file import token_file, write_token_file
from wms.config import config_dir_from_env, load_config
from wms.config.loader import ENV_CONFIG
from wms.config.models import parse_bind as parse_host_port
from wms.core.errors import ConfigError, InvalidInput, Unauthorized, WmsError
from wms.core.identity import Identity
from wms import logs
from wms.db.engine import database_problem, describe_database_error, safe_url
from wms.db.migrate import schema_problem, upgrade
from wms.backends.local import stop_local_pilots
from wms.services.pilots import make_launcher
from wms.services import quotas as quotas_service
from wms.services.runtime import Runtime
from wms.services.tokens import authenticate, create_token, default_lifetime


# Connections the kernel queues before the server accepts them (uvicorn's default).
LISTEN_BACKLOG = 2048


def client_host(host: str) -> str:
    """The address clients use for a bind address (a wildcard means this machine)."""
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return url_host(host)


def parse_bind(bind: str) -> tuple[str, int]:
    """``--bind`` (or wms.yaml bind) as (host, port): wms.yaml's rule, IPv6 as ``[::1]:8080``."""
    try:
        return parse_host_port(bind)
    except ValueError as exc:
        raise ConfigError(str(exc), where="--bind") from None


def url_host(host: str) -> str:
    """``host`` as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


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
    from wms.api import balance
    from wms.api.app import create_app
    from wms.api.deadlines import HeaderDeadline
    from wms.api.guard import REQUEST_THREAD_STACK

    threading.stack_size(REQUEST_THREAD_STACK)    # as serve() does: see there
    logs.configure_from_environment()             # the level serve() chose, through WMS_LOG_LEVEL
    _no_delay_on_shared_sockets()
    config = load_config(config_dir_from_env(None))
    HeaderDeadline.configure(config.settings.backpressure)
    app = create_app(Runtime.create(config))
    balance.install(app)                          # the connections shared out with the other workers
    freeze_start_up_heap()
    return app


def freeze_start_up_heap() -> None:
    """Keep the garbage collector from walking what start-up built again.

    The configuration, the complex tables, the routes and their models live
    as long as the process. A full collection walked all of them, and took
    150-270 ms of a server process under 32 pilots, during which it answered
    nothing (7-18 ms once frozen; docs/benchmarks.md). Objects made later
    are collected as ever; frozen ones are still freed when no longer used.
    """
    gc.collect()
    gc.freeze()


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


def raise_open_file_limit() -> int:
    """Let this process (and the workers it starts) open as many files as the
    system allows it, and return that number.

    Each connection is a file descriptor, and the usual soft limit (1,024)
    is soon reached by a crowd of pilots, or by one client holding a
    thousand sockets open: past it the server accepts no connection at all
    (the event loop stops accepting for a second at a time) and pilots wait
    in the listen backlog. The hard limit is the administrator's choice
    (docs/security.md, "Holding the door").
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    except (ValueError, OSError):
        return soft
    return wanted


class StartupError(WmsError):
    """Something the server needs is not there: it stops before it serves."""


def _bind(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        hint = " (another server runs there: stop it, or choose another with --bind)" \
            if exc.errno == errno.EADDRINUSE else ""
        raise StartupError(f"cannot listen on {url_host(host)}:{port}: {exc.strerror or exc}{hint}") from None
    return sock


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening, made before anything
    is announced or started, so that a taken port stops start-up at once."""
    sock = _bind(host, port)
    sock.listen(LISTEN_BACKLOG)
    return sock


class WorkerSockets(socket.socket):
    """The port of `wms server --workers N`: held by the supervisor, and
    listened on by each worker through a socket of its own.

    One listening socket shared by the workers lets one of them accept a
    whole burst of connections (the event loop accepts all that wait), and a
    pilot's kept-alive connection stays where it landed: measured, 32 pilots
    connecting at once all went to one of two workers in most runs, and the
    server answered at one worker's rate. With SO_REUSEPORT each worker
    listens on its own socket and the kernel spreads new connections over
    them evenly (by a hash of the client's address and port).

    The supervisor's socket is bound, not listening, so it receives no
    connection. Each worker is handed this object and, when it is unpickled
    in the new process, binds its own socket on the same port, listened on
    once the worker serves.
    Another server started on the port while a worker listens is refused,
    as by a single process (in the second or two before the first worker
    listens, one could still bind it).
    """

    def __init__(self, host: str, port: int) -> None:
        listening_socket(host, port).close()      # taken by anyone else: stop here, as a single process does
        held = _bind(host, port, reuse_port=True)
        super().__init__(held.family, held.type, held.proto, fileno=held.detach())
        self.address = (host, port)

    def __reduce_ex__(self, protocol: object) -> tuple[Any, ...]:
        return worker_socket, self.address


def worker_socket(host: str, port: int) -> socket.socket:
    """A worker's own socket on the port its supervisor holds (WorkerSockets),
    bound only: uvicorn listens on it when the worker starts serving, so that
    no connection is given to a worker still starting."""
    return _bind(host, port, reuse_port=True)


def check_database(runtime: Runtime, *, migrate: bool = False) -> None:
    """The database answers and holds the schema this code needs (``migrate``:
    bring it there first, as `wms up` does); else StartupError in one line."""
    engine = runtime.engine
    problem = database_problem(engine)
    if problem is None:
        try:
            if migrate:
                upgrade(engine)
            problem = schema_problem(engine)
        except SQLAlchemyError as exc:
            problem = describe_database_error(exc)
    if problem is not None:
        raise StartupError(f"database {safe_url(runtime.config.settings.database_url)}: {problem}")


def tls_files(certificate: str | None, key: str | None) -> dict[str, str]:
    """uvicorn's options for `wms server --tls-cert --tls-key`: both or neither,
    each a file this process can read, the pair one that loads; WmsError saying
    which and why."""
    import ssl

    if certificate is None and key is None:
        return {}
    if certificate is None or key is None:
        raise InvalidInput("--tls-cert and --tls-key go together: give the certificate (chain) and its key")
    for option, path in (("--tls-cert", certificate), ("--tls-key", key)):
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise InvalidInput(f"{option} {path}: cannot read it: {exc.strerror}") from None
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certificate, key)
    except (ssl.SSLError, ValueError) as exc:
        raise InvalidInput(f"--tls-cert {certificate} with --tls-key {key}: not a certificate and its key "
                           f"({exc})") from None
    return {"ssl_certfile": certificate, "ssl_keyfile": key}


def serve(config_dir: str | None, bind: str | None, *, embedded: bool, workers: int = 1,
          log_level: str | None = None, tls_cert: str | None = None, tls_key: str | None = None) -> int:
    """`wms server` / `wms up`: check everything, bind, announce, start the
    agents (`wms up`), then serve. Any failure before serving is one line
    on stderr and exit 1, with nothing left running."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from wms.api import balance
    from wms.api.app import create_app
    from wms.api.deadlines import HeaderDeadline
    from wms.api.guard import REQUEST_THREAD_STACK
    from wms.api.metrics import shared_metrics_directory

    # Threads started from here on (the ones that run requests among them)
    # get a stack deep enough for any text the input limits let through.
    threading.stack_size(REQUEST_THREAD_STACK)

    database_url = None
    try:
        level = logs.configure_from_environment(log_level)
        config = load_config(config_dir_from_env(config_dir))
        database_url = config.settings.database_url
        host, port = parse_bind(bind or config.settings.bind)
        runtime = Runtime.create(config)
        check_database(runtime, migrate=embedded)
        # A bad config/rqs file stops start-up.
        quotas_service.read_rule_set_files(runtime, runtime.configured_complexes)
        sock = WorkerSockets(host, port) if workers > 1 and not embedded else listening_socket(host, port)
        HeaderDeadline.configure(config.settings.backpressure)
        tls = tls_files(tls_cert, tls_key)
        raise_open_file_limit()
    except WmsError as exc:
        print(f"wms: {exc}", file=sys.stderr)
        return 1
    except SQLAlchemyError as exc:
        print(f"wms: {describe_database_error(exc, database_url)}", file=sys.stderr)
        return 1
    with sock:
        if embedded:
            token_path = ensure_local_token(runtime)
            print(f"wms up: manager token for {getpass.getuser()} in {token_path}", file=sys.stderr)
        # uvicorn leaves logging alone (log_config=None: wms.logs has set it
        # up) and writes no access log: the API's guard writes one line per
        # request, with its request id.
        options: dict[str, Any] = dict(
            log_config=None, log_level=level.lower(), access_log=False, proxy_headers=True,
            # The deadline on each request's headers (wms/api/deadlines.py).
            # No limit_concurrency: it counts every open connection, so a
            # client holding sockets open would have the pilots refused 503.
            http=HeaderDeadline,
            # Behind a TLS reverse proxy, X-Forwarded-For/-Proto are believed
            # from forwarded_allow_ips only (docs/deployment.md, "Behind TLS").
            forwarded_allow_ips=config.settings.forwarded_allow_ips, **tls)
        scheme = "https" if tls else "http"
        if workers > 1 and not embedded:
            # uvicorn's supervisor starts the workers (spawned: they build
            # their runtimes afresh) and restarts one that dies.
            os.environ[ENV_CONFIG] = str(Path(config_dir_from_env(config_dir)).resolve())
            runtime.engine.dispose()
            supervisor = Multiprocess(uvicorn.Config("wms.server:worker_app", factory=True, workers=workers,
                                                     **options), sockets=[sock])
            print(f"wms: serving {scheme}://{url_host(host)}:{port}/api/v1 with {workers} worker processes "
                  "(OpenAPI at /docs)", file=sys.stderr)
            # the workers' counts, summed when scraped; their connections, shared out
            with contextlib.suppress(KeyboardInterrupt), shared_metrics_directory(), \
                    balance.shares_directory(workers):
                supervisor.run()
            return 0
        server = uvicorn.Server(uvicorn.Config(create_app(runtime), **options))
        freeze_start_up_heap()
        print(f"wms: serving {scheme}://{url_host(host)}:{port}/api/v1 (OpenAPI at /docs)", file=sys.stderr)
        scheduler = None
        if embedded:
            # The embedded default's local computing element: the SiteDirector
            # starts pilots as local processes that talk to this server. One
            # person's machine: where it cannot sandbox the jobs (no bwrap, no
            # user namespaces), they still run, unisolated and said so.
            launcher = make_launcher(runtime, url=f"http://{client_host(host)}:{port}",
                                     log_dir=Path(config.settings.pilot_log_dir),
                                     pilot_options=("--if-no-isolation", "run"))
            scheduler = Scheduler(runtime, agents={**AGENTS, "site_director": site_director.agent(launcher)})
            scheduler.start()
            print(f"wms up: agents in-process: {', '.join(sorted(scheduler.agents))}", file=sys.stderr)
        try:
            # uvicorn stops on Ctrl-C, then raises it again: a clean stop.
            with contextlib.suppress(KeyboardInterrupt):
                server.run(sockets=[sock])
        finally:
            if scheduler is not None:
                scheduler.stop()
            if embedded:
                # The pilots of the embedded computing element end with the server they serve
                # (after the SiteDirector's run in progress, which may be starting some).
                if scheduler is not None:
                    scheduler.join(timeout=10)
                stop_local_pilots()
    return 0 if server.started else 1


def run_agents(config_dir: str | None, log_level: str | None = None) -> int:
    """`wms agents`: the periodic agents in this process, until Ctrl-C."""
    try:
        logs.configure_from_environment(log_level)
        runtime = Runtime.create(load_config(config_dir_from_env(config_dir)))
        check_database(runtime)
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
