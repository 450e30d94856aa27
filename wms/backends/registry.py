"""The computing-element backends by the name a queue's ``Backend``
parameter gives (wms.core.pilot_backends.BACKEND_NAMES lists the same
names for the configuration check); a launcher may be given others
(tests, site-specific ones)."""

from __future__ import annotations

from wms.backends.arc import ArcBackend
from wms.backends.local import LocalBackend
from wms.backends.slurm import SlurmBackend
from wms.backends.ssh import SshBackend

BACKEND_TYPES: dict[str, type] = {"local": LocalBackend, "slurm": SlurmBackend, "ssh": SshBackend,
                                  "arc": ArcBackend}
