"""Log lines of `wms server`, `wms up` and `wms agents`: level, format,
request ids (docs/deployment.md, "Logs").

:func:`configure` is called once by each of those commands (and by each
worker process of `wms server --workers N`), never on import, so that a
program or a test importing the server's modules keeps its own logging.

* The level (``--log-level``, else ``WMS_LOG_LEVEL``, else INFO) applies
  to our loggers (``wms.*``: the API and its access log, the services, the
  agents) and to uvicorn's. Other libraries stay at WARNING whatever the
  level: SQLAlchemy's INFO lines would print every statement with its
  parameters, pilots' output and token digests among them.
* ``WMS_LOG_FORMAT=json`` writes one JSON object per line (time, level,
  logger, message, request_id and the line's structured fields); the
  default ``text`` writes one readable line.
* The request id of the request being served lives in a context variable
  that the API's guard sets; every line logged while serving it carries
  it, including those of the route's thread (anyio copies the context
  into the worker thread).

Nothing logged here or by the API holds a bearer token: the access log
writes the method, path and status, never a header, and hides the value
of any query parameter whose name mentions a token.
"""

from __future__ import annotations

import atexit
import collections
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import Any, TextIO
from urllib.parse import parse_qsl, urlencode

from wms.core.errors import ConfigError

ENV_LEVEL = "WMS_LOG_LEVEL"
ENV_FORMAT = "WMS_LOG_FORMAT"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
FORMATS = ("text", "json")
DEFAULT_LEVEL = "INFO"
DEFAULT_FORMAT = "text"

#: The loggers --log-level sets; every other one stays at WARNING.
OUR_LOGGERS = ("wms", "uvicorn")
OTHERS_LEVEL = logging.WARNING

TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s%(request_tag)s %(message)s"

#: The id of the request this code runs for, None outside a request.
current_request_id: ContextVar[str | None] = ContextVar("wms_request_id", default=None)

# An id a client or a proxy sent is kept when it is short and plain (no
# space, quote or control character that could forge a log line or a
# header); anything else is replaced by one of ours.
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:=+/-]{0,127}")
_CONTROL = re.compile("[\x00-\x1f\x7f\u2028\u2029]")
_SECRET_PARAMETER = re.compile(r"token|secret|password", re.IGNORECASE)
HIDDEN = "***"


# ------------------------------------------------------------------ choices
def choose_level(given: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The level: ``given`` (--log-level), else $WMS_LOG_LEVEL, else INFO;
    ConfigError naming where a bad one came from."""
    env = os.environ if environ is None else environ
    where, value = ("--log-level", given) if given else (ENV_LEVEL, env.get(ENV_LEVEL) or DEFAULT_LEVEL)
    level = value.strip().upper()
    if level == "WARN":
        level = "WARNING"
    if level not in LEVELS:
        raise ConfigError(f"expected one of {', '.join(LEVELS)}, got {value!r}", where=where)
    return level


def choose_format(environ: Mapping[str, str] | None = None) -> str:
    """The format from $WMS_LOG_FORMAT: text (default) or json."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_FORMAT) or DEFAULT_FORMAT
    if value.strip().lower() not in FORMATS:
        raise ConfigError(f"expected one of {', '.join(FORMATS)}, got {value!r}", where=ENV_FORMAT)
    return value.strip().lower()


# ------------------------------------------------------------------ request ids
def new_request_id() -> str:
    return os.urandom(8).hex()


def request_id_from(header: bytes | str | None) -> str:
    """The id of a request: its X-Request-ID when sane, else a new one."""
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    if header is not None and _SANE_REQUEST_ID.fullmatch(header.strip()):
        return header.strip()
    return new_request_id()


def shown_query(query: bytes | str) -> str:
    """A query string fit for a log: values of token-like parameters hidden."""
    text = query.decode("latin-1") if isinstance(query, bytes) else query
    if not text or _SECRET_PARAMETER.search(text) is None:
        return text
    pairs = parse_qsl(text, keep_blank_values=True)
    return urlencode([(k, HIDDEN if _SECRET_PARAMETER.search(k) else v) for k, v in pairs], safe="*")


# ------------------------------------------------------------------ formatting
class RequestIdFilter(logging.Filter):
    """Stamps the current request id on each record (``request_id``, and
    ``request_tag``: `` [id]`` or nothing, for the text format)."""

    def filter(self, record: logging.LogRecord) -> bool:
        rid = getattr(record, "request_id", None) or current_request_id.get()
        record.request_id = rid
        record.request_tag = f" [{rid}]" if rid else ""
        return True


def one_line(text: str) -> str:
    """*text* on one line: control characters (a newline in a name the
    caller sent, say) written as escapes (``\\n``, ``\\x00``). For log
    lines and for the API's error details alike."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


class TextFormatter(logging.Formatter):
    """TEXT_FORMAT, with the message kept on its line: a newline or other
    control character in a value the caller chose (a pilot id, a path) is
    written as an escape, so that no one can forge a log line. A traceback
    still follows on lines of its own."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = one_line(record.message)
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per line; a record's ``fields`` (``extra={"fields": {...}}``)
    are added as keys of their own."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if getattr(record, "request_id", None):
            entry["request_id"] = record.request_id
        fields = getattr(record, "fields", None)
        if isinstance(fields, Mapping):
            for key, value in fields.items():
                entry.setdefault(str(key), value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class LineWriter(logging.Handler):
    """A handler that formats a record in the thread that logs it and leaves
    the writing to one thread of its own, which writes what has gathered
    every ``every`` seconds in one call.

    A server logs from dozens of request threads at once (an access line
    per request, a line per match decision). With a plain StreamHandler
    each of them takes the handler's lock for a write to stderr, and under
    load they queued on that lock (a quarter of a profile's samples at 32
    pilots). A queue that wakes the writer for each line was the next cost:
    at 800 lines a second, each wake-up took the interpreter's lock away
    from the request threads (7 % of the samples of a profile holding that
    lock, though an A/B of the whole server could not tell it from the
    noise; docs/benchmarks.md). So a line
    is appended to a deque, which wakes nobody, and the writer looks every
    ``every`` seconds: a line reaches stderr at most that late, and a
    warning or an error at once, with what gathered before it. Lines keep
    their order; what is gathered is written at exit (atexit), and a forked
    child starts a writer of its own (what was logged before a fork is
    written before it).
    """

    EVERY = 0.05

    def __init__(self, stream: TextIO, every: float = EVERY) -> None:
        super().__init__()
        self.stream = stream
        self.every = every
        self._writer: threading.Thread | None = None
        self._start()

    def _start(self) -> None:
        self._lines: collections.deque[str] = collections.deque()
        self._stop = threading.Event()
        self._writing = threading.Lock()
        self._writer = threading.Thread(target=self._write, name="wms-log-writer", daemon=True)
        self._writer.start()

    def handle(self, record: logging.LogRecord) -> logging.LogRecord | bool:  # type: ignore[override]
        # No handler lock: formatting shares nothing, and deque.append is atomic.
        kept = self.filter(record)
        if isinstance(kept, logging.LogRecord):
            record = kept
        if kept:
            self.emit(record)
        return kept

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._lines.append(self.format(record))
        except Exception:  # noqa: BLE001 - logging never raises into the caller
            self.handleError(record)
            return
        if record.levelno >= logging.WARNING:
            self.flush()        # what went wrong is on stderr before the caller goes on

    def _write(self) -> None:
        while True:
            stopping = self._stop.wait(self.every)
            self.flush()
            if stopping:
                return

    def flush(self) -> None:
        """Write what has gathered, now (the writer, or a process about to fork)."""
        with self._writing:     # one batch at a time, so lines stay in order
            lines = self._lines
            batch = []
            while lines:
                batch.append(lines.popleft())
            try:
                if batch:
                    self.stream.write("".join(f"{line}\n" for line in batch))
                    self.stream.flush()
            except (OSError, ValueError):    # a closed stderr: nothing more can be said
                pass

    def close(self) -> None:
        """Write what is gathered, then stop the writer."""
        writer = self._writer
        if writer is not None and writer.is_alive():
            self._stop.set()
            writer.join(timeout=5)
        self._writer = None
        super().close()

    def after_fork(self) -> None:
        if self._writer is not None:
            self._start()


_WRITERS: list[LineWriter] = []


def _close_writers() -> None:
    for writer in _WRITERS:
        writer.close()


def _flush_writers() -> None:
    for writer in _WRITERS:
        writer.flush()


def _restart_writers_in_child() -> None:
    for writer in _WRITERS:
        writer.after_fork()


atexit.register(_close_writers)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_flush_writers, after_in_child=_restart_writers_in_child)


def make_handler(fmt: str, stream: TextIO | None = None) -> logging.Handler:
    """The handler of :func:`configure`: stderr through a :class:`LineWriter`;
    a given ``stream`` (a test's) is written at once, in the caller's thread."""
    handler: logging.Handler
    if stream is None:
        handler = LineWriter(sys.stderr)
        _WRITERS.append(handler)
    else:
        handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(RequestIdFilter())
    handler._wms_logs = True  # type: ignore[attr-defined]
    return handler


def skip_unused_record_fields() -> None:
    """Stop the logging module from finding, for each record, what no line
    of ours shows: the caller's file and line (a walk up the stack), the
    thread and the process (the logging HOWTO's "Optimization"). About a
    tenth of the cost of a line, which a server pays twice a request."""
    logging._srcfile = None    # type: ignore[attr-defined]
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False


def configure(level: str, fmt: str, stream: TextIO | None = None) -> None:
    """Send every log line to stderr (or ``stream``) in ``fmt``, ours at ``level``.

    Idempotent: a second call replaces the handler of the first.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_wms_logs", False):
            root.removeHandler(handler)
            handler.close()
            if handler in _WRITERS:
                _WRITERS.remove(handler)
    root.addHandler(make_handler(fmt, stream))
    if stream is None:
        skip_unused_record_fields()
    root.setLevel(OTHERS_LEVEL)
    for name in OUR_LOGGERS:
        logging.getLogger(name).setLevel(level)


def configure_from_environment(given_level: str | None = None) -> str:
    """:func:`configure` with the level and format chosen from the
    environment; the level, which children inherit through $WMS_LOG_LEVEL."""
    level, fmt = choose_level(given_level), choose_format()
    configure(level, fmt)
    os.environ[ENV_LEVEL] = level
    return level
