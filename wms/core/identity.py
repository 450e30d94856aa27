"""Who is calling: taken from the bearer token, never from a JDL."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Identity:
    user: str
    group: str
    vo: str
    role: str
