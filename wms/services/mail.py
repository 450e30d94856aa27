"""Notification mail through the SMTP server of wms.yaml (``smtp``).

Without one the mail is logged instead, so a set-up without mail loses
nothing silently. A failing server is logged too: mail never fails the
change it reports.
"""

from __future__ import annotations

import logging
import smtplib
from email.message import EmailMessage
from typing import Any, Sequence

log = logging.getLogger("wms.mail")


def send(smtp: Any, recipients: Sequence[str], subject: str, body: str) -> bool:
    """Send one mail; True if the server took it."""
    if smtp is None:
        log.info("no smtp configured; not mailed to %s: %s", ",".join(recipients), subject)
        return False
    message = EmailMessage()
    message["From"] = smtp.sender
    message["To"] = ", ".join(recipients)
    message["Subject"] = subject
    message.set_content(body)
    try:
        with smtplib.SMTP(smtp.host, smtp.port, timeout=10) as client:
            client.send_message(message)
    except (OSError, smtplib.SMTPException) as exc:
        log.warning("mail to %s failed: %s", ",".join(recipients), exc)
        return False
    return True
