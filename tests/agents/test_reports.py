"""Each agent run is one INFO line with its name, its time and its report
(cut short in the text; whole in the JSON log's fields)."""

from __future__ import annotations

import logging

from agents.reports import SHOWN_REPORT_CHARS, log_run, shown_report
from agents.scheduler import Scheduler


def test_a_report_is_shown_on_one_line_and_cut_when_long():
    assert shown_report({"returned": 0, "stalled": 2}) == '{"returned":0,"stalled":2}'
    long = shown_report({"queues": {f"Site/CE/q{i}": {"new": i} for i in range(100)}})
    assert len(long) == SHOWN_REPORT_CHARS and long.endswith("...")


def test_a_run_is_one_info_line_with_the_whole_report_in_its_fields(caplog):
    report = {"queues": {f"q{i}": i for i in range(100)}}
    with caplog.at_level(logging.INFO, logger="wms.agents"):
        log_run("site_director", report, 1.23456)
    [record] = caplog.records
    assert record.getMessage() == f"agent site_director ran in 1.23 s: {shown_report(report)}"
    assert record.fields == {"agent": "site_director", "duration_s": 1.235, "report": report}


def test_the_in_process_scheduler_logs_each_run_and_each_failure(runtime, caplog):
    def broken(runtime, now):
        raise RuntimeError("no luck")

    scheduler = Scheduler(runtime, agents={"quiet": lambda runtime, now: {"done": 1}, "broken": broken},
                          periods={"quiet": 60, "broken": 60})
    with caplog.at_level(logging.INFO, logger="wms.agents"):
        scheduler.run_once("quiet")
        scheduler.run_once("broken")
    lines = [(r.levelname, r.getMessage().split(" ran in ")[0]) for r in caplog.records]
    assert lines == [("INFO", "agent quiet"), ("ERROR", "agent broken failed")]
