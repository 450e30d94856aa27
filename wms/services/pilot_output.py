"""What a SiteDirector pilot printed (`wms pilots --output`; GET
/api/v1/pilots/{id}/output), asked of the backend that started it.

Each backend knows where its pilots' output is and when it is there
(wms/backends/base.py, ``output``): the local and Slurm pilots write their
log as they run, the ssh and ARC backends bring it back when the pilot
ends. The backends are those the SiteDirector uses, writing to wms.yaml's
``pilot_log_dir``.
"""

from __future__ import annotations

from pathlib import Path

from wms.core.errors import NotFound
from wms.db import pilots as pilots_db
from wms.db.engine import reading
from wms.services.pilots import make_launcher
from wms.services.runtime import Runtime

# Bytes of a pilot's log `wms pilots --output` shows (the tail: a pilot
# living for days may write a lot; the end says how it ended).
PILOT_OUTPUT_LIMIT = 1 << 20


def pilot_output(runtime: Runtime, pilot_id: str) -> str:
    """The last PILOT_OUTPUT_LIMIT bytes the pilot printed (stdout and stderr)."""
    with reading(runtime.engine) as conn:
        pilot = pilots_db.get_pilot(conn, pilot_id)
    if pilot is None:
        raise NotFound(f"no such pilot: {pilot_id}")
    log_dir = Path(runtime.config.settings.pilot_log_dir)
    text = None
    if pilot["backend_ref"]:        # else its backend has not taken it (yet): it has printed nothing
        backend = make_launcher(runtime, log_dir=log_dir).backend(pilot["backend"])
        text = backend.output(pilot["backend_ref"], PILOT_OUTPUT_LIMIT)
    if text is None:
        raise NotFound(f"pilot {pilot_id} has no log in {log_dir} (yet)")
    return text
