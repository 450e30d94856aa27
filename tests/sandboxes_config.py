"""A runtime whose sandboxes live in a test's own place, with small limits."""

from __future__ import annotations

import dataclasses
import hashlib
import io
from pathlib import Path

from sqlalchemy.engine import Engine

from tests.helpers import default_config
from wms.services.runtime import Runtime
from wms.services.sandboxes import Received

FILE_BYTES = 600_000       # more than two pieces of the database store
JOB_BYTES = 1_000_000


def sandbox_runtime(engine: Engine, store: str, directory: Path, **settings: object) -> Runtime:
    base = default_config()
    values = {"store": store, "directory": str(directory), "file_bytes": FILE_BYTES, "job_bytes": JOB_BYTES,
              **settings}
    sandboxes = base.settings.sandboxes.model_copy(update=values)
    config = dataclasses.replace(base, settings=base.settings.model_copy(update={"sandboxes": sandboxes}))
    return Runtime.create(config, engine)


def received(data: bytes) -> tuple[str, Received]:
    """(sha256, the body as the API hands it to the service)."""
    digest = hashlib.sha256(data).hexdigest()
    return digest, Received(content=io.BytesIO(data), size=len(data), sha256=digest)
