"""The result of one layer's check: allowed or not, and why.

Codes separate "not here, not now" (a consumable is in use, NOT_NOW) from
"never here" (a static mismatch, NEVER): only NEVER may be cached per task
queue and queue, because nothing but a configuration change alters it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Code(StrEnum):
    OK = "OK"
    NOT_NOW = "NOT_NOW"
    NEVER = "NEVER"
    ERROR = "ERROR"


@dataclass(frozen=True)
class Verdict:
    code: Code
    layer: str = ""
    reason: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def allowed(self) -> bool:
        return self.code is Code.OK


ALLOW = Verdict(Code.OK)


def never(layer: str, reason: str, **detail: Any) -> Verdict:
    return Verdict(Code.NEVER, layer, reason, detail)


def not_now(layer: str, reason: str, **detail: Any) -> Verdict:
    return Verdict(Code.NOT_NOW, layer, reason, detail)
