"""`wms`: the command line of the workload manager.

Job and pool commands are thin HTTP clients of the API; `up`, `server`,
`db upgrade` and `admin token create` act on the server side (its
configuration and database) and are run where the server runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import quote

from wms.cli import output
from wms.cli.client import Client, ClientError, read_stdin, read_text_file
from wms.cli.program import UsageError, add_version, run_program
from wms.cli.sandboxes import LocalFileError, fetch_outputs, send_inputs

JOB_COLUMNS = ["JobID", "Status", "MinorStatus", "Owner", "OwnerGroup", "Site", "Queue", "SubmitPool", "TaskQueue",
               "AR"]


EXIT_NO_MATCH = 3     # request-job (INTERFACE.md) and match-queues: nothing matched


# --------------------------------------------------------------- parsing helpers
def parse_requests(text: str) -> dict[str, str]:
    """``-l r=v,r2=v2`` as a mapping (Grid Engine's resource request list)."""
    out: dict[str, str] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise UsageError(f"-l {text!r}: expected name=value[,name=value...], got {item!r}")
        out[name.strip()] = value.strip()
    return out


class RequestAction(argparse.Action):
    """``-l``: into the hard or the soft list, depending on the last -hard/-soft."""

    def __call__(self, parser, namespace, values, option_string=None):
        target = "soft_requests" if getattr(namespace, "soft_mode", False) else "hard_requests"
        merged = dict(getattr(namespace, target) or {})
        try:
            merged.update(parse_requests(values))
        except UsageError as exc:
            parser.exit(2, f"{parser.prog}: {exc}\n")
        setattr(namespace, target, merged)


class ModeAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        namespace.soft_mode = option_string == "-soft"


def read_jdl(path: str) -> tuple[str, str]:
    """(source, text) of a JDL file or of stdin (``-``); refuses what is not UTF-8 text."""
    try:
        if path == "-":
            return "<stdin>", read_stdin()
        return path, read_text_file(path)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def job_ids(values: Sequence[str]) -> list[int]:
    ids = []
    for value in values:
        if not value.isdigit():
            raise UsageError(f"not a job id: {value!r}")
        ids.append(int(value))
    return ids


# --------------------------------------------------------------- client commands
def queue_request(values: Sequence[str]) -> str:
    """``-q a,b -q c``: qsub's hard queue list, as the request ``qname=a|b|c`` (complex(5): qname is
    requestable, and a RESTRING request may list alternatives with ``|`` and use wildcards)."""
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    if not names:
        raise UsageError("-q: give one or more queues, Site/CE/Queue (wildcards allowed)")
    return "|".join(names)


def submit_options(args: argparse.Namespace) -> dict[str, Any]:
    """The submission's options in the request body: -l (-hard/-soft), -q, -pe, -ar, -P, -N
    (`wms submit` and qsub)."""
    body: dict[str, Any] = {}
    hard = dict(args.hard_requests or {})
    if args.queues:
        hard["qname"] = queue_request(args.queues)
    if hard:
        body["resource_requests"] = hard
    if args.soft_requests:
        body["soft_resource_requests"] = args.soft_requests
    if args.pe:
        name, slots = args.pe
        if not slots.isdigit() or int(slots) < 1:
            raise UsageError(f"-pe {name} {slots}: the slot count must be a positive integer")
        body["parallel_environment"], body["slots"] = name, int(slots)
    for key, value in (("reservation", args.ar), ("project", args.project), ("job_name", args.name)):
        if value is not None:
            body[key] = value
    return body


def cmd_submit(args: argparse.Namespace) -> int:
    jdls = [(f, *read_jdl(f)) for f in args.files]
    client = Client()
    try:
        sandboxes = send_inputs(client, jdls)      # checked whole, then uploaded, before the submission
    except LocalFileError as exc:
        raise UsageError(str(exc)) from None
    body: dict[str, Any] = {"jdls": [{"source": source, "text": text, **({"input_sandbox": sb} if sb else {})}
                                     for (_, source, text), sb in zip(jdls, sandboxes)], **submit_options(args)}
    if args.strict:
        body["strict"] = True
    result = client.post("/jobs", body)
    # Stored, but no pilot will ever be sent for them: said at once rather than found out in a day.
    for warning in result.get("warnings") or []:
        print(f"wms submit: warning: {warning}", file=sys.stderr)
    if args.json:
        output.as_json({"job_ids": result["job_ids"]})
    else:
        for job_id in result["job_ids"]:
            print(job_id)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    rows = Client().get("/jobs", job_id=job_ids(args.ids))
    return show(args, rows, JOB_COLUMNS)


def cmd_jobs(args: argparse.Namespace) -> int:
    # The server answers a page at a time; each is printed as it comes (docs/api.md, "Pages").
    pages = Client().pages("/jobs", limit=args.limit, status=args.status, owner=args.owner)
    return show_pages(args, pages, JOB_COLUMNS)


def cmd_kill(args: argparse.Namespace) -> int:
    result = Client().post("/jobs/kill", {"job_ids": job_ids(args.ids)})
    if args.json:
        output.as_json(result)
        return 0
    stopping = set(result.get("stopping", []))
    for job_id in result["killed"]:
        print(f"{job_id} killed" + ("; its pilot stops the payload at its next heartbeat" if job_id in stopping else ""))
    for job_id, reason in result["not_killed"].items():
        print(f"{job_id} not killed: {reason}")
    return 0


def cmd_logging_info(args: argparse.Namespace) -> int:
    [job_id] = job_ids([args.id])
    rows = Client().get(f"/jobs/{job_id}/history")
    return show(args, rows, ["Status", "MinorStatus", "Source", "Time"])


def cmd_jdl(args: argparse.Namespace) -> int:
    [job_id] = job_ids([args.id])
    result = Client().get(f"/jobs/{job_id}/jdl")
    if args.json:
        output.as_json(result)
    else:
        print(result["OriginalJDL"] if args.original else result["JDL"])
    return 0


def cmd_pools(args: argparse.Namespace) -> int:
    given = [v is not None for v in (args.site, args.ce, args.queue)]
    client = Client()
    if any(given):
        if not all(given):
            raise UsageError("--site, --ce and --queue go together (getSubmitPoolsForQueue)")
        pools = client.get("/matcher/submit-pools", site=args.site, ce=args.ce, queue=args.queue)
        if args.json:
            output.as_json(pools)
        else:
            for pool in pools:
                print(pool)
        return 0
    # The server answers a page at a time; each is printed as it comes (docs/api.md, "Pages").
    pages = client.pages("/pools")
    if args.json:
        # INTERFACE.md: `wms pools --json` is the list of pool ids; --details gives each pool whole.
        output.json_pages(pages if args.details else ([row["SubmitPool"] for row in rows] for rows in pages))
        return 0

    def cells(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**row, "Requirements": output.cell(row["Requirements"]), "Jobs": output.cell(row.get("Jobs") or {})}
                for row in rows]

    output.table_pages(map(cells, pages), ["SubmitPool", "VO", "QueueCount", "Jobs", "LastUpdate", "Requirements"])
    return 0


def cmd_match_queues(args: argparse.Namespace) -> int:
    client = Client()
    if args.target.isdigit():
        result = client.get(f"/jobs/{int(args.target)}/match-queues")
    else:
        source, text = read_jdl(args.target)
        result = client.post("/match-queues", {"source": source, "text": text})
    # Like request-job: exit 3 when nothing matches, so that scripts can tell it from success and from errors.
    status = 0 if result["eligible"] else EXIT_NO_MATCH
    if args.json:
        output.as_json(result["eligible"])
        return status
    for name in result["eligible"]:
        print(name)
    if args.verbose:
        rows = [{"Queue": q, "Reason": r} for q, r in sorted(result["rejected"].items())]
        if rows:
            print()
            output.table(rows, ["Queue", "Reason"])
    elif not result["eligible"]:
        print("no queue can run this job (-v says why)", file=sys.stderr)
    return status


def cmd_task_queues(args: argparse.Namespace) -> int:
    pages = Client().pages("/task-queues")
    if args.json:
        output.json_pages(pages)
        return 0

    def cells(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**row, "Sites": output.cell(row["Definition"].get("sites")) or "ANY",
                 "Platforms": output.cell(row["Definition"].get("platforms")),
                 "Tags": output.cell(row["Definition"].get("tags"))} for row in rows]

    output.table_pages(
        map(cells, pages),
        ["TaskQueue", "Owner", "OwnerGroup", "SubmitPool", "CPUTime", "Priority", "WaitingJobs", "Sites", "Platforms", "Tags"],
    )
    return 0


def cmd_request_job(args: argparse.Namespace) -> int:
    """One pilot-style match request; exit 3 when nothing matches."""
    load: dict[str, str] = {}
    for item in args.load or []:
        load.update(parse_requests(item))
    body: dict[str, Any] = {
        "site": args.site, "ce": args.ce, "queue": args.queue, "host": args.host, "slots": args.slots,
        "pilot_id": args.pilot_id or f"cli-{args.host}", "load": load,
    }
    if args.pools is not None:
        body["pools"] = [p for p in args.pools.split(",") if p]
    for key in ("platform", "cpu_time_left"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    if args.tags:
        body["tags"] = args.tags.split(",")
    result = Client().post("/matcher/request-job", body)
    if not result["match"]:
        print(f"no match: {result['reason']}", file=sys.stderr)
        return EXIT_NO_MATCH
    output.as_json(result["job"])
    return 0


def cmd_output(args: argparse.Namespace) -> int:
    [job_id] = job_ids([args.id])
    if args.dir is not None:
        written, missing = fetch_outputs(Client(), job_id, Path(args.dir))
        if args.json:
            output.as_json({"JobID": job_id, "files": [str(p) for p in written], "missing": missing})
            return 0
        for path in written:
            print(path)
        if missing:
            print(f"OutputSandbox files job {job_id} did not write: {', '.join(missing)}", file=sys.stderr)
        return 0
    result = Client().get(f"/jobs/{job_id}/output")
    if args.json:
        output.as_json(result)
        return 0
    sys.stdout.write(result["stdout"])
    if result["stderr"]:
        sys.stderr.write(result["stderr"])
    if result["truncated"]:
        print(f"(output of job {job_id} truncated to its tail)", file=sys.stderr)
    return 0


def cmd_why(args: argparse.Namespace) -> int:
    [job_id] = job_ids([args.id])
    result = Client().get(f"/jobs/{job_id}/why")
    if args.json:
        output.as_json(result)
        return 0
    print(f"job {job_id}: {result['Status']} ({result['MinorStatus']})")
    if result.get("Holds"):
        output.table(result["Holds"], ["Type", "Holder", "Reason", "Time"])
    if result["Queues"]:
        output.table(result["Queues"], ["Queue", "Layer", "Reason"])
    print(result["Summary"])
    return 0


def cmd_pilots(args: argparse.Namespace) -> int:
    if args.output:
        answer = Client().get(f"/pilots/{quote(args.output, safe='')}/output")
        if args.json:
            output.as_json(answer)
        else:
            sys.stdout.write(answer["Output"])
        return 0
    pages = Client().pages("/pilots")
    if args.json:
        output.json_pages(pages)
        return 0
    warned: list[dict[str, Any]] = []  # for the footer: the only rows kept past their page

    def cells(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        warned.extend(row for row in rows if row.get("Warning"))
        return [{**row, "Isolation": isolation_cell(row)} for row in rows]

    output.table_pages(map(cells, pages),
                       ["PilotID", "Queue", "VO", "Backend", "State", "Isolation", "JobsRun", "Submitted", "LastUpdate"])
    print_unisolated(warned)
    return 0


def isolation_cell(pilot: dict[str, Any]) -> str:
    """The Isolation column: marked (!) when the server warns of it, "-" when the pilot has not said."""
    cell = pilot.get("Isolation") or "-"
    return f"{cell} (!)" if pilot.get("Warning") else cell


def print_unisolated(pilots: list[dict[str, Any]]) -> None:
    """The footer naming the pilots the server warns of (active, without isolation), each with its note."""
    warned = [p for p in pilots if p.get("Warning")]
    if warned:
        named = ", ".join(p["PilotID"] + (f" ({p['IsolationNote']})" if p.get("IsolationNote") else "")
                          for p in warned)
        print(f"(!) {len(warned)} pilot(s) run payloads without isolation: {named}")


def cmd_queues(args: argparse.Namespace) -> int:
    rows = Client().get("/queues")
    if args.json:
        output.as_json(rows)
        return 0
    for row in rows:
        row["Consumables"] = output.cell(row["Consumables"])
    output.table(rows, ["Kind", "Name", "resv/used/tot", "Consumables"])
    return 0


def cmd_accounting(args: argparse.Namespace) -> int:
    if args.reservations:
        pages = Client().pages("/accounting/reservations")
        return show_pages(args, pages, ["ar_id", "name", "owner", "account", "state", "slots", "reserved_slot_seconds",
                                 "used_slot_seconds", "jobs"])
    pages = Client().pages("/accounting/jobs")
    return show_pages(args, pages, ["JobID", "Owner", "Status", "Queue", "Host", "Slots", "Start", "End", "WallClock",
                             "ExitCode", "AR"])


def show(args: argparse.Namespace, rows: list[dict[str, Any]], columns: list[str]) -> int:
    if args.json:
        output.as_json(rows)
    else:
        output.table(rows, columns)
    return 0


def show_pages(args: argparse.Namespace, pages: Iterator[list[dict[str, Any]]], columns: list[str]) -> int:
    """``show`` for a paged list: printed page by page, never held whole."""
    if args.json:
        output.json_pages(pages)
    else:
        output.table_pages(pages, columns)
    return 0


# --------------------------------------------------------------- server-side commands
def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from wms.config import config_dir_from_env, load_config
    from wms.db.engine import make_engine
    from wms.db.migrate import upgrade

    config = load_config(config_dir_from_env(args.config_dir))
    args.database_url = config.settings.database_url    # named by an error's one line
    done = upgrade(make_engine(config.settings.database_url))
    print(f"database at {safe_url(config.settings.database_url)}: {done.describe()}")
    return 0


def cmd_db_current(args: argparse.Namespace) -> int:
    from wms.config import config_dir_from_env, load_config
    from wms.db.engine import make_engine
    from wms.db.migrate import standing

    config = load_config(config_dir_from_env(args.config_dir))
    args.database_url = config.settings.database_url    # named by an error's one line
    engine = make_engine(config.settings.database_url)
    try:
        where = standing(engine)
    finally:
        engine.dispose()
    if args.json:
        output.as_json({"database": safe_url(config.settings.database_url), "revision": where.current,
                        "newest": where.head, "state": where.state, "pending": list(where.behind)})
    else:
        print(f"database at {safe_url(config.settings.database_url)} {where.describe()}")
    # 0 when nothing is to do: scripts may run `wms db current || wms db upgrade`.
    return 0 if where.state in ("current", "newer") else 1


def _token_engine(args: argparse.Namespace):
    from wms.config import config_dir_from_env, load_config
    from wms.db.engine import make_engine

    config = load_config(config_dir_from_env(args.config_dir))
    args.database_url = config.settings.database_url    # named by an error's one line
    return config, make_engine(config.settings.database_url)


def token_lifetime(args: argparse.Namespace, settings: Any):
    """--lifetime (or the older --days); else wms.yaml's pilot_token_lifetime
    for a pilot token and token_lifetime for the others."""
    from wms.core.durations import parse_duration
    from wms.services.tokens import default_lifetime

    if args.lifetime is not None and args.days is not None:
        raise UsageError("give --lifetime or --days, not both")
    if args.lifetime is not None:
        return parse_duration(args.lifetime)
    if args.days is not None:
        return parse_duration(f"{args.days}d")
    return default_lifetime(settings, args.role)


def cmd_login(args: argparse.Namespace) -> int:
    from wms.cli import login
    from wms.cli.client import DEFAULT_URL, server_root

    try:
        return login.main_login(server_root(os.environ.get("WMS_URL") or DEFAULT_URL), args.vo, args.issuer)
    except login.LoginError as exc:
        raise ClientError(str(exc)) from None


def cmd_logout(args: argparse.Namespace) -> int:
    from wms.cli import login

    print("signed out" if login.logout() else "not signed in")
    return 0


def cmd_token_create(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from wms.core.identity import Identity
    from wms.services.tokens import create_token

    config, engine = _token_engine(args)
    identity = Identity(user=args.user, group=args.group, vo=args.vo, role=args.role)
    token = create_token(
        engine, identity, datetime.now(timezone.utc),
        description=args.description, lifetime=token_lifetime(args, config.settings),
    )
    print(token)
    return 0


TOKEN_COLUMNS = ["ID", "User", "Group", "VO", "Role", "Pilot", "Slots", "Isolation", "State", "Expires", "Created",
                 "Description"]


def cmd_token_list(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from wms.services.tokens import list_tokens

    _, engine = _token_engine(args)
    return show(args, list_tokens(engine, datetime.now(timezone.utc)), TOKEN_COLUMNS)


def cmd_token_revoke(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from wms.services.tokens import revoke_token

    _, engine = _token_engine(args)
    view = revoke_token(engine, args.id, datetime.now(timezone.utc))
    if args.json:
        output.as_json(view)
    else:
        print(f"token {view['ID']} ({view['User']}, {view['Role']}) revoked")
    return 0


def cmd_job_token_key_rotate(args: argparse.Namespace) -> int:
    import getpass
    from datetime import datetime, timezone

    from wms.services.job_tokens import KEY_SYNC_INTERVAL, rotate_key

    _, engine = _token_engine(args)
    version = rotate_key(engine, getpass.getuser(), datetime.now(timezone.utc))
    if args.json:
        output.as_json({"Version": version})
    else:
        print(f"job token key rotated (version {version}): every job token handed out before it is refused "
              f"by every server within {KEY_SYNC_INTERVAL:g} s")
    return 0


def cmd_pools_refresh(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from wms.services.pools import refresh_submit_pools
    from wms.services.runtime import Runtime

    config, engine = _token_engine(args)
    try:
        report = refresh_submit_pools(Runtime.create(config, engine), datetime.now(timezone.utc))
    finally:
        engine.dispose()
    if args.json:
        output.as_json(report)
    else:
        print(f"SubmitPool map refreshed from {config.directory}: {report['pools']} pools, "
              f"{report['task_queues']} task queues, {report['jobs_changed']} waiting jobs changed their status")
    return 0


def cmd_server(args: argparse.Namespace) -> int:
    from wms.server import serve

    return serve(args.config_dir, args.bind, embedded=False, workers=args.workers, log_level=args.log_level,
                 tls_cert=args.tls_cert, tls_key=args.tls_key)


def cmd_agents(args: argparse.Namespace) -> int:
    from wms.server import run_agents

    return run_agents(args.config_dir, log_level=args.log_level)


def cmd_up(args: argparse.Namespace) -> int:
    from wms.server import serve

    return serve(args.config_dir, args.bind, embedded=True, log_level=args.log_level)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, got {text!r}")
    return int(text)


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"a number of seconds, 0 or more, got {text!r}")
    return value


def _batch(text: str) -> int:
    from wms.core.limits import MATCH_BATCH_MAX

    if _positive(text) > MATCH_BATCH_MAX:
        raise argparse.ArgumentTypeError(f"at most {MATCH_BATCH_MAX} jobs a request, got {text!r}")
    return int(text)


def _counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"a comma-separated list of numbers, got {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"every number of pilots must be at least 1, got {text!r}")
    return counts


def _command_line(text: str) -> list[str]:
    import shlex

    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a command line ({exc}): {text!r}") from None
    if not argv:
        raise argparse.ArgumentTypeError("give a command to run, e.g. /bin/true")
    return argv


def cmd_bench(args: argparse.Namespace) -> int:
    from wms.bench import run_bench

    if getattr(args, "url", None) and args.database in ("sqlite", "postgresql", "mariadb"):
        raise UsageError("--url: give --database the URL of that server's database (the bench fills it with "
                         f"jobs and pilot tokens), not {args.database!r}")
    return run_bench(args)


def safe_url(url: str) -> str:
    from wms.db.engine import safe_url as shown   # imported here: most commands never load SQLAlchemy

    return shown(url)


# --------------------------------------------------------------- the parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wms", description="Workload management: submit and follow jobs.",
        epilog="Lists print as aligned tables (on a terminal a cell is cut at 60 characters, ending in …; "
               "piped, whole) or, with --json, as JSON.")
    add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, func: Callable[[argparse.Namespace], int], help: str, json: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(func=func)
        if json:
            p.add_argument("--json", action="store_true", help="print one JSON document")
        return p

    def server_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", dest="config_dir", default=None, help="configuration directory (WMS_CONFIG, ./config)")
        p.add_argument("--bind", default=None, help="HOST:PORT to listen on (default: bind in wms.yaml)")
        p.add_argument("--log-level", dest="log_level", default=None, type=str.upper,
                       choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                       help="DEBUG, INFO (default), WARNING or ERROR (WMS_LOG_LEVEL); WMS_LOG_FORMAT=json for JSON lines")

    p = command("login", cmd_login, "sign in with your VO's identity provider (OAuth 2.0 device flow): prints "
                "a URL and a code to enter there, then keeps the tokens for every later command", json=False)
    p.add_argument("--vo", default=None, help="the VO whose identity provider to use (when the server offers several)")
    p.add_argument("--issuer", default=None, help="the identity provider's issuer URL (when the server offers several)")
    command("logout", cmd_logout, "forget the tokens of wms login", json=False)
    p = command("up", cmd_up, "run the whole system in one process (API, agents, local pilots; SQLite by default)", json=False)
    server_options(p)
    p = command("server", cmd_server, "run the HTTP API (stateless; run several behind a balancer)", json=False)
    server_options(p)
    p.add_argument("--workers", type=_positive, default=1,
                   help="worker processes sharing the port (default 1; about one per core: docs/deployment.md)")
    p.add_argument("--tls-cert", dest="tls_cert", default=None, metavar="FILE",
                   help="serve HTTPS with this certificate (PEM, its chain after it), with --tls-key; "
                        "or put a TLS terminator in front (docs/deployment.md)")
    p.add_argument("--tls-key", dest="tls_key", default=None, metavar="FILE", help="the certificate's private key (PEM)")
    p = command("agents", cmd_agents, "run the periodic agents in this process (pool refresh and clean-up, leases)",
                json=False)
    server_options(p)

    p = command("db", lambda a: (a.db_parser.print_help(), 2)[1], "database administration", json=False)
    db_sub = p.add_subparsers(dest="db_command", required=True, metavar="SUBCOMMAND")
    p.set_defaults(db_parser=p)
    up = db_sub.add_parser("upgrade", help="create or migrate the schema")
    up.add_argument("--config", dest="config_dir", default=None)
    up.set_defaults(func=cmd_db_upgrade)
    current = db_sub.add_parser("current", help="say which revision the schema is at and what an upgrade would apply")
    current.add_argument("--config", dest="config_dir", default=None)
    current.add_argument("--json", action="store_true", help="machine-readable output")
    current.set_defaults(func=cmd_db_current)

    p = command("admin", lambda a: 2, "administration on the server's database", json=False)
    admin_sub = p.add_subparsers(dest="admin_command", required=True, metavar="SUBCOMMAND")
    token = admin_sub.add_parser("token", help="bearer tokens").add_subparsers(dest="token_command", required=True)
    create = token.add_parser("create", help="create a token and print it")
    create.add_argument("--user", required=True)
    create.add_argument("--group", required=True)
    create.add_argument("--vo", required=True)
    create.add_argument("--role", required=True, choices=["user", "pilot", "operator", "manager"])
    create.add_argument("--description", default="")
    create.add_argument("--lifetime", default=None, metavar="DURATION",
                        help="how long the token lives: 3600, 90m, 12h, 30d, 1d12h, or never (default: wms.yaml "
                             "token_lifetime, pilot_token_lifetime for --role pilot)")
    create.add_argument("--days", type=int, default=None, help=argparse.SUPPRESS)   # older spelling of --lifetime Nd
    create.add_argument("--config", dest="config_dir", default=None)
    create.set_defaults(func=cmd_token_create)
    listing = token.add_parser("list", help="every token (never the secret): id, owner, role, pilot, state, expiry")
    listing.add_argument("--json", action="store_true", help="print one JSON document")
    listing.add_argument("--config", dest="config_dir", default=None)
    listing.set_defaults(func=cmd_token_list)
    revoke = token.add_parser("revoke", help="revoke a token by its ID (from `wms admin token list`)")
    revoke.add_argument("id", metavar="ID")
    revoke.add_argument("--json", action="store_true", help="print one JSON document")
    revoke.add_argument("--config", dest="config_dir", default=None)
    revoke.set_defaults(func=cmd_token_revoke)

    key = admin_sub.add_parser("job-token-key", help="the key job tokens are signed with").add_subparsers(
        dest="key_command", required=True)
    rotate = key.add_parser("rotate", help="replace the key: every job token handed out so far stops working")
    rotate.add_argument("--json", action="store_true", help="print one JSON document")
    rotate.add_argument("--config", dest="config_dir", default=None)
    rotate.set_defaults(func=cmd_job_token_key_rotate)

    pools = admin_sub.add_parser("pools", help="the SubmitPool-to-queue map").add_subparsers(
        dest="pools_command", required=True)
    refresh = pools.add_parser("refresh", help="recompute every pool's queues from this configuration now "
                                               "(as the submit_pool_refresher agent does on its period)")
    refresh.add_argument("--json", action="store_true", help="print one JSON document")
    refresh.add_argument("--config", dest="config_dir", default=None)
    refresh.set_defaults(func=cmd_pools_refresh)

    p = command("submit", cmd_submit, "submit jobs; prints one job ID per line")
    p.add_argument("files", nargs="+", metavar="FILE.jdl", help="JDL files ('-' reads standard input)")
    p.add_argument("-l", metavar="r=v,..", action=RequestAction, help="resource requests (hard unless after -soft)")
    p.add_argument("-soft", nargs=0, action=ModeAction, help="following -l requests are soft")
    p.add_argument("-hard", nargs=0, action=ModeAction, help="following -l requests are hard (default)")
    p.add_argument("-pe", nargs=2, metavar=("PE", "N"), help="parallel environment and slot count")
    p.add_argument("-ar", type=int, metavar="ID", help="run inside advance reservation ID")
    p.add_argument("-q", dest="queues", action="append", metavar="wc_queue_list",
                   help="run only in these queues: Site/CE/Queue, comma-separated, wildcards allowed (-l qname=)")
    p.add_argument("-P", dest="project", metavar="PRJ", help="project")
    p.add_argument("-N", dest="name", metavar="NAME", help="job name")
    p.add_argument("--strict", action="store_true",
                   help="refuse the whole submission (exit 1, nothing stored) if no configured queue could ever "
                        "run one of its jobs; without it, such jobs are stored with a warning")
    p.set_defaults(hard_requests=None, soft_requests=None, soft_mode=False)

    p = command("status", cmd_status, "state, minor status, site, queue and pool of jobs")
    p.add_argument("ids", nargs="+", metavar="ID")
    p = command("jobs", cmd_jobs, "list jobs (users see their own)")
    p.add_argument("--status")
    p.add_argument("--owner")
    p.add_argument("--limit", type=int, metavar="N",
                   help="at most N jobs (default: every one; the server sends them a page at a time)")
    p = command("kill", cmd_kill, "kill jobs")
    p.add_argument("ids", nargs="+", metavar="ID")
    from wms.cli import controls    # here: it imports this module
    controls.add_commands(command)
    p = command("logging-info", cmd_logging_info, "the state history of a job")
    p.add_argument("id", metavar="ID")
    p = command("jdl", cmd_jdl, "the JDL of a job as the optimizers left it")
    p.add_argument("id", metavar="ID")
    p.add_argument("--original", action="store_true", help="as submitted")
    p = command("pools", cmd_pools, "SubmitPools; with --site/--ce/--queue: getSubmitPoolsForQueue")
    p.add_argument("--site")
    p.add_argument("--ce")
    p.add_argument("--queue")
    p.add_argument("--details", action="store_true",
                   help="with --json: each pool as an object (VO, QueueCount, Jobs, Requirements), not only its id")
    p = command("match-queues", cmd_match_queues, "the queues that could run a job or a JDL file (exit 3: none)")
    p.add_argument("target", metavar="ID|FILE.jdl")
    p.add_argument("-v", "--verbose", action="store_true", help="also say why each other queue cannot")
    command("task-queues", cmd_task_queues, "the task queues, their jobs and priorities")
    p = command("why", cmd_why, "every queue and the first layer that keeps a job from it")
    p.add_argument("id", metavar="ID")
    p = command("output", cmd_output, "the job's stdout and stderr; with --dir, its output sandbox too")
    p.add_argument("id", metavar="ID")
    p.add_argument("--dir", metavar="D", help="write the OutputSandbox files and the job's stdout and stderr "
                                              "(as its StdOutput/StdError name them, else std.out and std.err) "
                                              "into D (created if need be)")
    p = command("pilots", cmd_pilots, "the pilots the SiteDirector submitted (and those started by hand "
                "that declared themselves), their state, isolation and jobs run; warns of pilots without isolation")
    p.add_argument("--output", metavar="PILOT_ID", help="what that pilot printed (its stdout and stderr)")
    command("queues", cmd_queues, "resv/used/tot slots and consumables per queue, host and global (qstat -f)")
    p = command("accounting", cmd_accounting, "finished jobs with their advance reservation; --reservations: "
                "reserved and used slot-seconds per reservation")
    p.add_argument("--reservations", action="store_true", help="one line per advance reservation")
    p = sub.add_parser("request-job", help="one pilot-style match request (exit 3: no match)",
                       description="one pilot-style match request; prints the job as JSON, or exits 3")
    p.set_defaults(func=cmd_request_job)
    p.add_argument("--site", required=True)
    p.add_argument("--ce", required=True)
    p.add_argument("--queue", required=True)
    p.add_argument("--host", required=True)
    p.add_argument("--slots", type=int, default=1)
    p.add_argument("--load", action="append", metavar="k=v,..", help="load values the node reports")
    p.add_argument("--pools", help="comma-separated SubmitPools (default: looked up)")
    p.add_argument("--platform")
    p.add_argument("--cpu-time-left", type=float, dest="cpu_time_left")
    p.add_argument("--tags")
    p.add_argument("--pilot-id", dest="pilot_id")

    p = command("bench", cmd_bench, "benchmarks (docs/benchmarks.md)", json=False)
    bench_sub = p.add_subparsers(dest="bench_command", required=True, metavar="BENCHMARK")
    b = bench_sub.add_parser("submit", help="jobs per second through the optimizer chain, in bulk")
    b.add_argument("--database", default="sqlite", help="sqlite, postgresql, mariadb or a database URL")
    b.add_argument("--jobs", type=int, default=20000, help="jobs per run")
    b.add_argument("--batch", type=int, default=1000, help="jobs per submission")
    b.add_argument("--runs", type=int, default=3, help="runs; the median is reported")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_bench)
    b = bench_sub.add_parser("match", help="matches per second and latency with concurrent pilots")
    b.add_argument("--database", default="sqlite", help="sqlite, postgresql, mariadb or a database URL")
    b.add_argument("--jobs", type=int, default=100_000, help="waiting jobs")
    b.add_argument("--task-queues", type=int, default=1000, dest="task_queues")
    b.add_argument("--threads", type=int, default=4, help="concurrent pilots per Matcher process")
    b.add_argument("--processes", type=int, default=1, help="Matcher processes (as several wms server)")
    b.add_argument("--seconds", type=float, default=20)
    b.add_argument("--runs", type=int, default=3, help="runs; medians are reported")
    b.add_argument("--seed", type=int, default=1)
    b.add_argument("--quotas", type=int, default=0, metavar="N",
                   help="also run with N enabled resource quota sets of 10 rules each and compare")
    b.add_argument("--declared-slots", type=int, default=None, metavar="N", dest="declared_slots",
                   help="each thread one pilot whose token declared N slots: every claim also debits the "
                        "pilot's own row (N far above what a run hands out measures the cost of the cap)")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_bench)
    b = bench_sub.add_parser("http", help="matches per second and latency of pilots over HTTP against wms server")
    b.add_argument("--database", default="postgresql", help="sqlite, postgresql, mariadb or a database URL")
    b.add_argument("--jobs", type=int, default=100_000, help="waiting jobs")
    b.add_argument("--task-queues", type=int, default=1000, dest="task_queues")
    b.add_argument("--pilots", type=_counts, default=[1, 4, 32, 256, 1000],
                   help="numbers of concurrent pilots, one step each (default 1,4,32,256,1000)")
    b.add_argument("--order", choices=["ladder", "balanced"], default="ladder",
                   help="ladder: one step per number, as given; balanced: each number once in every position "
                        "(N x N steps), as the steps of a run drift; medians per number either way")
    b.add_argument("--threads", type=int, default=4, help="threads of the in-process reference run")
    b.add_argument("--workers", type=_positive, default=1, help="wms server --workers")
    b.add_argument("--max-in-flight", type=_positive, dest="max_in_flight",
                   help="the server's backpressure.max_in_flight (default: wms.yaml's)")
    b.add_argument("--retry-after", type=_positive, dest="retry_after",
                   help="the server's backpressure.retry_after, seconds (default: wms.yaml's)")
    b.add_argument("--request-threads", type=_positive, dest="request_threads",
                   help="the server's backpressure.request_threads (default: wms.yaml's)")
    b.add_argument("--match-threads", type=_positive, dest="match_threads",
                   help="the server's backpressure.match_threads (default: wms.yaml's)")
    b.add_argument("--url", help="drive the wms server already running at this http:// address instead of "
                                 "starting one; --database must then be the URL of its database, which is filled")
    b.add_argument("--batch", type=_batch, metavar="K",
                   help="each pilot offers K slots and asks for up to K jobs a request (POST /matcher/request-jobs; "
                        "default: one job a request, request-job)")
    b.add_argument("--seconds", type=float, default=10, help="seconds counted per step")
    b.add_argument("--warm-up", type=_non_negative, default=5.0, dest="warm_up", metavar="SECONDS",
                   help="seconds each step runs before counting starts: the pilots arrive together, and only "
                        "errors and duplicates count until then (default 5)")
    b.add_argument("--runs", type=int, default=1, help="runs; medians are reported")
    b.add_argument("--seed", type=int, default=1)
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_bench)
    b = bench_sub.add_parser("e2e", help="short jobs per second from submission to Done, through a real server "
                                         "and real pilots; with --against slurm beside a private one-node Slurm")
    b.add_argument("--database", default="sqlite", help="sqlite, postgresql, mariadb or a database URL")
    b.add_argument("--jobs", type=_positive, default=1000, help="jobs, submitted as one parametric JDL (default 1000)")
    b.add_argument("--pilots", type=_positive, default=4, help="pilots, started as the SiteDirector's local "
                                                               "backend starts them (default 4)")
    b.add_argument("--slots", type=_positive, default=8, help="slots of each pilot (default 8)")
    b.add_argument("--payload", type=_command_line, default=["/bin/true"], metavar="COMMAND",
                   help="each job's command line (default /bin/true)")
    b.add_argument("--isolation", choices=["bubblewrap", "none"], default="bubblewrap",
                   help="the sandbox the pilots run payloads in (the queue's Isolation; default bubblewrap)")
    b.add_argument("--workers", type=_positive, default=1, help="wms server --workers")
    b.add_argument("--max-in-flight", type=_positive, dest="max_in_flight",
                   help="the server's backpressure.max_in_flight (default: wms.yaml's, 32); past it the pilots' "
                        "calls are refused (429) and come back after Retry-After")
    b.add_argument("--against", choices=["slurm"],
                   help="slurm: then the same jobs as one job array of a private one-node Slurm with as many "
                        "CPUs as the pilots have slots, and the ratio of the two rates (root, slurm-wlm and munge)")
    b.add_argument("--settle", type=_non_negative, default=60.0, metavar="SECONDS",
                   help="with --against: the pause between the two parts (default 60), so that Slurm's files are "
                        "not made just after the pilots deleted theirs (ext4 without a journal looks past inodes "
                        "deleted in the last minute for a new one)")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from wms.core.errors import WmsError

    parser = build_parser()
    args = parser.parse_args(argv)
    prog = f"wms {args.command}"

    def body() -> int:
        try:
            return args.func(args)
        except UsageError as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 2
        except (ClientError, WmsError) as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 1
        except (BrokenPipeError, KeyboardInterrupt):
            raise               # run_program ends these quietly
        except Exception as exc:  # noqa: BLE001 - a user sees one line, never a traceback
            print(f"{prog}: {unexpected_error(exc, getattr(args, 'database_url', None))}", file=sys.stderr)
            return 1

    return run_program(body)


def unexpected_error(exc: Exception, database_url: str | None) -> str:
    """One line for an error no command reports itself: a database's (a
    server-side command on a bad database_url) or any other."""
    from sqlalchemy.exc import SQLAlchemyError

    if isinstance(exc, SQLAlchemyError):
        from wms.db.engine import describe_database_error

        return describe_database_error(exc, database_url)
    return f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
