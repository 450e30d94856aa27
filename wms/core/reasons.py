"""Why something was refused, as a constant with structured details.

A ``Reason`` names the rule that refused (``code``, stable: programs,
metrics and tests use it) and the sentence a person reads (``text``, a
format string). What varies, the resource, the amounts, the jobs in the
way, travels beside it as details and is rendered only where a person
reads it: ``reason.format(**details)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Reason:
    code: str
    text: str

    def format(self, **details: Any) -> str:
        return self.text.format_map(details)
