"""The complex table at run time: `qconf -sc` shows it, `qconf -Mc` replaces it.

cluster.yaml's `complexes` (with the built-ins) is the table until a
manager replaces it with `qconf -Mc`; from then on the stored table is
the truth, for every server process. ``Runtime.read_stored_complexes`` is the one
reader: it looks at the stored version at most once a second and, when it
changed, rebuilds the table and drops the Matcher's caches that depend on
it, so no caller has to remember to.
"""

from __future__ import annotations

import socket
from datetime import datetime

from wms.core.complexes import ComplexTable
from wms.core.errors import ConfigError, Forbidden, InvalidInput
from wms.core.identity import Identity
from wms.db import cluster_objects as objects_db
from wms.services.retry import run_in_transaction
from wms.services import stored_objects
from wms.services.runtime import COMPLEXES_KIND as KIND, Runtime, check_complex_values


def show(runtime: Runtime) -> str:
    return runtime.read_stored_complexes().render()


def modify(runtime: Runtime, identity: Identity, text: str, now: datetime) -> list[str]:
    """Replace the whole complex table (qconf -Mc); refused whole if any line is wrong.

    The new table must keep every attribute the configuration's
    complex_values use, in a type their values read in.
    """
    if identity.role != "manager":
        raise Forbidden(f"{identity.user} must be manager to modify the complex entry list")
    table = ComplexTable.parse(text, source="complex file")
    try:
        check_complex_values(runtime.config, table)
    except ConfigError as exc:
        raise InvalidInput(f"the new complex table does not fit the configuration: {exc}") from None
    old = {cx.name: cx for cx in runtime.read_stored_complexes()}
    new = {cx.name: cx for cx in table}
    who = f"{identity.user}@{socket.gethostname()}"
    messages = [f'{who} added "{name}" to complex entry list' for name in sorted(new.keys() - old.keys())]
    messages += [f'{who} modified "{name}" in complex entry list'
                 for name in sorted(new.keys() & old.keys()) if new[name] != old[name]]
    messages += [f'{who} removed "{name}" from complex entry list' for name in sorted(old.keys() - new.keys())]
    if not messages:
        return ["complex entry list unchanged"]
    rendered = table.render()
    version = run_in_transaction(runtime.engine, lambda conn: objects_db.put_object(conn, KIND, rendered, identity.user, now))
    runtime.use_complexes(table)
    stored_objects.adopted(runtime, KIND, version)
    return messages
