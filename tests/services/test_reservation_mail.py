"""Mail on -m b/e/a to the -M addresses, through a real SMTP server (aiosmtpd)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

import pytest
from aiosmtpd.controller import Controller

from tests.reservations_config import USER1, reservation_config
from tests.servers import free_port
from wms.config.models import SmtpSettings
from wms.db import migrate
from wms.services import reservations as ar
from wms.services.runtime import Runtime

T0 = datetime(2030, 12, 14, 10, 0, tzinfo=timezone.utc)
HOUR = timedelta(hours=1)


def fresh_runtime(tmp_path, **settings) -> Runtime:
    url = f"sqlite:///{tmp_path / 'wms.db'}"
    migrate.upgrade(url)
    return Runtime.create(reservation_config(tmp_path / "c", database_url=url, **settings))


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], str]] = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((list(envelope.rcpt_tos), envelope.content.decode()))
        return "250 OK"


@pytest.fixture
def smtp():
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        yield controller.port, inbox
    finally:
        controller.stop()


def test_mail_at_begin_end_and_error(tmp_path, smtp):
    port, inbox = smtp
    runtime = fresh_runtime(tmp_path, smtp=SmtpSettings(host="127.0.0.1", port=port, sender="wms@example.org"))
    granted = ar.submit(runtime, USER1, ar.ReservationSpec(start=T0 + HOUR, duration="1:0:0", queues=["other.q"],
                                                           mail_options="bea", mail_list=["u1@example.org",
                                                                                          "boss@example.org"]), T0)
    ar.manage(runtime, T0 + HOUR)
    ar.manage(runtime, T0 + 2 * HOUR)
    subjects = [next(line for line in text.splitlines() if line.startswith("Subject:")) for _, text in inbox.messages]
    ar_id = granted["ar_id"]
    assert subjects == [f"Subject: Advance reservation {ar_id} (no name) started",
                        f"Subject: Advance reservation {ar_id} (no name) ended"]
    assert all(rcpt == ["u1@example.org", "boss@example.org"] for rcpt, _ in inbox.messages)


def test_without_smtp_the_mail_is_logged(tmp_path, caplog):
    runtime = fresh_runtime(tmp_path)
    ar.submit(runtime, USER1, ar.ReservationSpec(start=T0 + HOUR, duration="1:0:0", mail_options="b"), T0)
    with caplog.at_level(logging.INFO, logger="wms.mail"):
        ar.manage(runtime, T0 + HOUR)
    assert "no smtp configured; not mailed to user1: Advance reservation 1 (no name) started" in caplog.text
