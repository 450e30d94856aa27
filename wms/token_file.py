"""Where the command line and `wms up` keep a token: ~/.config/wms/token.

Shared by the client commands (which read it) and the server side (`wms up`
writes its manager token there), so it lives apart from both.
"""

from __future__ import annotations

import os
from pathlib import Path


def token_file() -> Path:
    return Path(os.environ.get("HOME", str(Path.home()))) / ".config" / "wms" / "token"


def write_token_file(token: str, path: Path | None = None) -> Path:
    """Keep ``token`` in ``path`` (default ~/.config/wms/token): the file is
    created 0600 in a 0700 directory and is never readable by others, not
    even for a moment (umask 077, ``os.open`` with the mode, then an atomic
    rename over the old file); an existing directory is narrowed to 0700."""
    path = path or token_file()
    old_umask = os.umask(0o077)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(descriptor, "w") as file:
                file.write(token + "\n")
            os.replace(temporary, path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
    finally:
        os.umask(old_umask)
    return path
