"""The result of one layer's check: allowed or not, and why.

Codes separate "not here, not now" (a consumable is in use, NOT_NOW) from
"never here" (a static mismatch, NEVER): only NEVER may be cached per task
queue and queue, because nothing but a configuration change alters it.
HOLD is a denial that takes the task queue's waiting jobs out of matching
(held by the system, wms.core.states): the job's own expression failed or
ran over its budget, which no pilot would change.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Mapping

from wms.core.reasons import Reason


class Code(StrEnum):
    OK = "OK"
    NOT_NOW = "NOT_NOW"
    NEVER = "NEVER"
    ERROR = "ERROR"
    HOLD = "HOLD"


@dataclass(frozen=True)
class Verdict:
    """``why`` is a constant of the layer that decided and ``detail`` what
    fills it; the sentence is rendered only when someone reads ``reason``."""

    code: Code
    layer: str = ""
    why: Reason | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def allowed(self) -> bool:
        return self.code is Code.OK

    @functools.cached_property
    def reason(self) -> str:
        # Written once per verdict: a cached static verdict is read by every
        # request that ends without a job (two threads may both write it).
        return self.why.format(**self.detail) if self.why is not None else ""

    @property
    def reason_code(self) -> str:
        return self.why.code if self.why is not None else ""


ALLOW = Verdict(Code.OK)


def never(layer: str, why: Reason, **detail: Any) -> Verdict:
    return Verdict(Code.NEVER, layer, why, detail)


def not_now(layer: str, why: Reason, **detail: Any) -> Verdict:
    return Verdict(Code.NOT_NOW, layer, why, detail)


def hold(layer: str, why: Reason, **detail: Any) -> Verdict:
    return Verdict(Code.HOLD, layer, why, detail)
