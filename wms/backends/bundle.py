"""The pilot as one file, for worker nodes that have python3 but not this
package: a zipapp of the ``pilot`` package (standard library only).

Its root ``__main__.py`` returns the pilot's exit code (zipapp's own ``-m``
template would drop it), so ``python3 pilot.pyz --url ...`` behaves as
``wms-pilot --url ...``.
"""

from __future__ import annotations

import io
import zipfile
from functools import lru_cache
from pathlib import Path

import pilot

_MAIN = "import sys\nfrom pilot.main import main\nsys.exit(main())\n"


@lru_cache(maxsize=1)
def pilot_zipapp() -> bytes:
    """The zipapp's bytes (built once per process)."""
    package = Path(pilot.__file__).parent
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("__main__.py", _MAIN)
        for source in sorted(package.glob("*.py")):
            archive.write(source, f"pilot/{source.name}")
    return buffer.getvalue()
