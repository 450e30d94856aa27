"""wms.logs: the level and format a server logs at, request ids, and lines
that never carry a secret."""

from __future__ import annotations

import io
import json
import logging

import pytest

from wms import logs
from wms.core.errors import ConfigError


@pytest.fixture(autouse=True)
def _logging_as_it_was():
    """configure() changes the process's logging: put it back for the other tests."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    ours = {name: logging.getLogger(name).level for name in logs.OUR_LOGGERS}
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, old in ours.items():
        logging.getLogger(name).setLevel(old)


@pytest.mark.parametrize("given, environ, level", [
    (None, {}, "INFO"),                                   # the default
    (None, {"WMS_LOG_LEVEL": "debug"}, "DEBUG"),
    (None, {"WMS_LOG_LEVEL": "warn"}, "WARNING"),
    ("ERROR", {"WMS_LOG_LEVEL": "DEBUG"}, "ERROR"),       # --log-level wins over the environment
])
def test_the_level_comes_from_the_option_then_the_environment(given, environ, level):
    assert logs.choose_level(given, environ) == level


@pytest.mark.parametrize("given, environ, where", [
    (None, {"WMS_LOG_LEVEL": "loud"}, "WMS_LOG_LEVEL"),
    ("loud", {}, "--log-level"),
])
def test_a_bad_level_names_where_it_came_from(given, environ, where):
    with pytest.raises(ConfigError) as caught:
        logs.choose_level(given, environ)
    assert str(caught.value) == f"{where}: expected one of DEBUG, INFO, WARNING, ERROR, got 'loud'"


def test_the_format_is_text_or_json():
    assert logs.choose_format({}) == "text"
    assert logs.choose_format({"WMS_LOG_FORMAT": "JSON"}) == "json"
    with pytest.raises(ConfigError, match="WMS_LOG_FORMAT: expected one of text, json, got 'xml'"):
        logs.choose_format({"WMS_LOG_FORMAT": "xml"})


@pytest.mark.parametrize("header", [b"abc-123", b"4bf92f3577b34da6a3ce929d0e0e4736", "Root=1-5759e988-bd86"])
def test_a_plain_request_id_is_kept(header):
    expected = header.decode() if isinstance(header, bytes) else header
    assert logs.request_id_from(header) == expected


@pytest.mark.parametrize("header", [None, b"", b"two words", b"line\nbreak", b"x" * 129, b'quote"d', b"-leading"])
def test_any_other_request_id_is_replaced_by_a_new_one(header):
    made = logs.request_id_from(header)
    assert made != (header or b"").decode("latin-1")
    assert len(made) == 16 and made.isalnum()


@pytest.mark.parametrize("query, shown", [
    (b"status=Waiting&owner=roland", "status=Waiting&owner=roland"),
    (b"token=wms_secret&status=Done", "token=***&status=Done"),
    (b"access_token=wms_secret", "access_token=***"),
    (b"", ""),
])
def test_a_logged_query_never_shows_a_token(query, shown):
    assert logs.shown_query(query) == shown


def _logged(fmt: str, emit) -> str:
    stream = io.StringIO()
    logs.configure("INFO", fmt, stream)
    emit()
    return stream.getvalue()


def test_a_json_line_carries_the_request_id_and_the_fields():
    def emit():
        context = logs.current_request_id.set("req-7")
        try:
            logging.getLogger("wms.access").info("GET /x 200", extra={"fields": {"status": 200}})
        finally:
            logs.current_request_id.reset(context)
        logging.getLogger("wms.agents").info("outside any request")

    first, second = [json.loads(line) for line in _logged("json", emit).splitlines()]
    assert first["level"] == "INFO" and first["logger"] == "wms.access" and first["message"] == "GET /x 200"
    assert first["request_id"] == "req-7" and first["status"] == 200
    assert first["time"].endswith("+00:00")
    assert "request_id" not in second


def test_a_text_line_shows_the_request_id_in_brackets():
    def emit():
        context = logs.current_request_id.set("req-8")
        try:
            logging.getLogger("wms.services.matcher").info("no job for pilot p1")
        finally:
            logs.current_request_id.reset(context)

    [line] = _logged("text", emit).splitlines()
    assert line.endswith("INFO    wms.services.matcher [req-8] no job for pilot p1")


def test_the_level_is_ours_and_other_libraries_stay_at_warning():
    def emit():
        logging.getLogger("wms.agents").debug("hidden at INFO")
        logging.getLogger("wms.agents").info("shown")
        logging.getLogger("sqlalchemy.engine.Engine").info("SELECT secret FROM tokens")
        logging.getLogger("sqlalchemy.pool").warning("pool warning shown")

    out = _logged("text", emit)
    assert "shown" in out and "pool warning shown" in out
    assert "hidden at INFO" not in out and "SELECT secret" not in out


def test_configure_twice_keeps_one_handler():
    before = len(logging.getLogger().handlers)
    logs.configure("INFO", "text", io.StringIO())
    logs.configure("DEBUG", "json", io.StringIO())
    ours = [h for h in logging.getLogger().handlers if getattr(h, "_wms_logs", False)]
    assert len(ours) == 1 and len(logging.getLogger().handlers) <= before + 1
    assert isinstance(ours[0].formatter, logs.JsonFormatter)
    assert logging.getLogger("wms").level == logging.DEBUG


def test_a_text_line_cannot_be_forged_by_a_value_with_a_newline():
    def emit():
        logging.getLogger("wms.services.matcher").info("no job for pilot %s", "p1\n2026-01-01 INFO forged")
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            logging.getLogger("wms.api").exception("request %s failed", "r1")

    lines = _logged("text", emit).splitlines()
    assert lines[0].endswith("no job for pilot p1\\n2026-01-01 INFO forged")
    assert lines[1].endswith("wms.api request r1 failed") and lines[2] == "Traceback (most recent call last):"


def line_writer_logger(name: str, out, **options) -> tuple[logs.LineWriter, logging.Logger]:
    """A logger of its own writing through a LineWriter to ``out`` (remove the writer and close it after)."""
    writer = logs.LineWriter(out, **options)
    writer.setFormatter(logs.TextFormatter())
    writer.addFilter(logs.RequestIdFilter())
    logger = logging.getLogger(name)
    logger.addHandler(writer)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return writer, logger


def test_the_line_writer_keeps_every_line_of_many_threads_in_order():
    """Forty threads logging at once, as a busy server's request threads do:
    every line is written, whole, each thread's lines in the order logged."""
    import threading

    out = io.StringIO()
    writer, logger = line_writer_logger("wms.test.line_writer", out)
    try:
        def log_lines(k: int) -> None:
            for i in range(200):
                logger.info("thread %d line %d", k, i)

        threads = [threading.Thread(target=log_lines, args=(k,)) for k in range(40)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        logger.removeHandler(writer)
        writer.close()                        # writes what is still queued
    lines = out.getvalue().splitlines()
    assert len(lines) == 40 * 200
    for k in range(40):
        mine = [int(line.rsplit(" ", 1)[1]) for line in lines if f" thread {k} line " in line]
        assert mine == list(range(200))


def test_a_server_process_writes_its_queued_lines_when_it_exits(tmp_path):
    """The lines a process logs just before it ends are on stderr: atexit
    writes what the writer had not yet written."""
    import subprocess
    import sys

    script = ("import logging; from wms import logs; logs.configure('INFO', 'text'); "
              "log = logging.getLogger('wms.test'); [log.info('line %d', i) for i in range(500)]")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert [line.rsplit(" ", 1)[1] for line in result.stderr.splitlines()] == [str(i) for i in range(500)]


def test_a_forked_child_logs_through_a_writer_of_its_own(tmp_path):
    import subprocess
    import sys

    script = ("import logging, os; from wms import logs; logs.configure('INFO', 'text'); "
              "log = logging.getLogger('wms.test'); log.info('parent');\n"
              "pid = os.fork()\n"
              "if pid == 0:\n"
              "    log.info('child'); logging.shutdown(); logs._close_writers(); os._exit(0)\n"
              "os.waitpid(pid, 0); log.info('parent again')")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    said = [line.rsplit(" ", 1)[-1] for line in result.stderr.splitlines()]
    assert said.count("child") == 1 and said[0] == "parent" and said[-1] == "again", result.stderr


def test_the_line_writer_writes_a_warning_at_once_and_gathers_the_rest():
    out = io.StringIO()
    writer, logger = line_writer_logger("wms.test.gathered", out, every=3600)    # its thread would wait an hour
    try:
        logger.info("first")
        assert out.getvalue() == ""                      # gathered
        logger.warning("second")
        assert [line.rsplit(" ", 1)[1] for line in out.getvalue().splitlines()] == ["first", "second"]
    finally:
        logger.removeHandler(writer)
        writer.close()
