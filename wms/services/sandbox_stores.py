"""Where sandbox content lives: a directory, or the database.

wms.yaml ``sandboxes.store`` chooses (docs/configuration.md, "Sandboxes"):

* ``directory``: one file per content under ``sandboxes.directory``, named
  by its SHA-256. For `wms up` and a single server: the files must be on a
  disk every server process sees.
* ``database``: the content in ``sandbox_chunks``, in pieces of
  ``CHUNK_BYTES``; every server reaches it, nothing else to run.

Content is named by its digest, so the same file sent by a thousand
parametric jobs is stored once. Every ``put`` stores the content again or
marks it fresh, and the cleaner removes only content that is both
unreferenced and older than ``orphan_grace``: an upload in progress is
never removed under its feet.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import BinaryIO, Protocol

from sqlalchemy.engine import Engine

from wms.core.sandboxes import CHUNK_BYTES
from wms.db import sandboxes as sandboxes_db
from wms.db.engine import reading
from wms.services.retry import run_in_transaction


class SandboxStore(Protocol):
    def put(self, sha256: str, content: BinaryIO, now: datetime) -> None:
        """Store ``content`` (already checked against ``sha256``), or mark the stored copy fresh."""

    def read(self, sha256: str) -> Iterator[bytes]:
        """The content in pieces; FileNotFoundError when there is none."""

    def exists(self, sha256: str) -> bool: ...

    def stored_before(self, before: datetime) -> list[str]:
        """The digests stored (or marked fresh) before ``before``."""

    def delete(self, sha256: str, stored_before: datetime) -> bool:
        """Remove the content if it is still older than ``stored_before`` (not stored again meanwhile)."""


class DirectoryStore:
    """Content under ``root/ab/abcdef...``; written to a temporary name, then renamed."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    def put(self, sha256: str, content: BinaryIO, now: datetime) -> None:
        target = self.path(sha256)
        if target.exists():
            os.utime(target)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=".upload-")
        try:
            with os.fdopen(fd, "wb") as out:
                while piece := content.read(CHUNK_BYTES):
                    out.write(piece)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def read(self, sha256: str) -> Iterator[bytes]:
        handle = open(self.path(sha256), "rb")  # FileNotFoundError now, not at the first piece

        def pieces() -> Iterator[bytes]:
            with handle:
                while piece := handle.read(CHUNK_BYTES):
                    yield piece

        return pieces()

    def exists(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def stored_before(self, before: datetime) -> list[str]:
        if not self.root.is_dir():
            return []
        limit = before.timestamp()
        return sorted(p.name for p in self.root.glob("??/*")
                      if not p.name.startswith(".") and p.stat().st_mtime < limit)

    def delete(self, sha256: str, stored_before: datetime) -> bool:
        path = self.path(sha256)
        try:
            if path.stat().st_mtime >= stored_before.timestamp():
                return False
            path.unlink()
        except FileNotFoundError:
            return False
        return True


class DatabaseStore:
    """Content in ``sandbox_chunks``: one row per piece, one statement per piece."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def put(self, sha256: str, content: BinaryIO, now: datetime) -> None:
        def store(conn) -> None:
            if sandboxes_db.touch_content(conn, sha256, now):
                return
            content.seek(0)
            seq = 0
            while piece := content.read(CHUNK_BYTES):
                sandboxes_db.add_piece(conn, sha256, seq, piece, now)
                seq += 1
            if seq == 0:
                sandboxes_db.add_piece(conn, sha256, 0, b"", now)   # an empty file still has its row

        run_in_transaction(self.engine, store)

    def read(self, sha256: str) -> Iterator[bytes]:
        if not self.exists(sha256):
            raise FileNotFoundError(sha256)

        def pieces() -> Iterator[bytes]:
            seq = 0
            while True:
                with reading(self.engine) as conn:      # one short read per piece: no long transaction
                    data = sandboxes_db.piece(conn, sha256, seq)
                if data is None:
                    return
                if data:
                    yield bytes(data)
                seq += 1

        return pieces()

    def exists(self, sha256: str) -> bool:
        with reading(self.engine) as conn:
            return sandboxes_db.has_content(conn, sha256)

    def stored_before(self, before: datetime) -> list[str]:
        with reading(self.engine) as conn:
            return sandboxes_db.stored_before(conn, before)

    def delete(self, sha256: str, stored_before: datetime) -> bool:
        return run_in_transaction(self.engine, lambda conn: sandboxes_db.drop_content(conn, sha256, stored_before))


def make_store(settings: object, engine: Engine) -> SandboxStore:
    """The store wms.yaml ``sandboxes`` names."""
    sandboxes = getattr(settings, "sandboxes")
    if sandboxes.store == "database":
        return DatabaseStore(engine)
    return DirectoryStore(sandboxes.directory)

