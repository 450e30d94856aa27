"""Token lifetimes as people write them: ``90s``, ``30m``, ``12h``, ``7d``,
``2w``, combined (``1d12h``), or plain seconds (``3600``); ``never`` for
no expiry. Pure functions."""

from __future__ import annotations

import re
from datetime import timedelta

from wms.core.errors import InvalidInput

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
NEVER = ("never", "none")
_PART = re.compile(r"(\d+)([smhdw])")


def parse_duration(text: str) -> timedelta | None:
    """``text`` as a positive duration; None for ``never``. InvalidInput otherwise."""
    value = str(text).strip().lower()
    if value in NEVER:
        return None
    if value.isdigit():
        seconds = int(value)
    else:
        parts = _PART.findall(value)
        if not parts or "".join(n + u for n, u in parts) != value:
            raise InvalidInput(f"not a duration: {text!r} (e.g. 3600, 90m, 12h, 7d, 1d12h, or never)")
        seconds = sum(int(n) * UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise InvalidInput(f"a lifetime must be positive, got {text!r}")
    return timedelta(seconds=seconds)


def format_duration(delta: timedelta) -> str:
    """The largest units first, e.g. ``1d2h``, ``45m``, ``0s``; a negative one with a ``-``."""
    seconds = int(delta.total_seconds())
    sign, seconds = ("-", -seconds) if seconds < 0 else ("", seconds)
    out = []
    for unit in ("d", "h", "m", "s"):
        count, seconds = divmod(seconds, UNITS[unit])
        if count:
            out.append(f"{count}{unit}")
    return sign + ("".join(out) or "0s")
