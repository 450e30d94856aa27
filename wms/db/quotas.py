"""Usage of resource quota rule instances (debit scopes ``rqs:set/rule:instance``)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, select, text

from wms.db.schema import resource_usage


def quota_usage(conn: Connection) -> list[tuple[str, str, float]]:
    """(scope, resource, used) of every rule instance in use."""
    stmt = select(resource_usage.c.scope, resource_usage.c.resource, resource_usage.c.used).where(
        resource_usage.c.scope.like("rqs:%"), resource_usage.c.used > 0)
    return [(s, r, float(u)) for s, r, u in conn.execute(stmt).all()]


_DEBIT_ALL: dict[int, object] = {}


def _debit_all_statement(count: int):
    """``UPDATE .. SET used = used + CASE .. END WHERE (key and fits) OR ..``, built once per count."""
    stmt = _DEBIT_ALL.get(count)
    if stmt is None:
        cases = " ".join(f"WHEN scope = :s{i} AND resource = :r{i} THEN :a{i}" for i in range(count))
        fits = " OR ".join(f"(scope = :s{i} AND resource = :r{i} AND used + :a{i} <= :c{i})" for i in range(count))
        stmt = _DEBIT_ALL[count] = text(f"UPDATE resource_usage SET used = used + CASE {cases} ELSE 0 END "
                                        f"WHERE {fits}")
    return stmt


def debit_all(conn: Connection, debits: Sequence[tuple[str, str, float, float]]) -> int | None:
    """Debit every (scope, resource, amount, capacity) that fits, in one statement.

    Returns None when all fitted, else the index of one that did not (the
    caller then rolls the whole transaction back, so the debits that did
    fit are undone too). One statement instead of one per rule instance:
    a job under several rule sets costs one round trip more, not several.
    The rows must exist (``ensure_usage_rows``) and be distinct.
    """
    if not debits:
        return None
    params: dict[str, object] = {}
    for i, (scope, resource, amount, capacity) in enumerate(debits):
        params.update({f"s{i}": scope, f"r{i}": resource, f"a{i}": amount, f"c{i}": capacity})
    if conn.execute(_debit_all_statement(len(debits)), params).rowcount == len(debits):
        return None
    # Which one: a row that did not fit was left as it was, so its used + amount is still over.
    for i, (scope, resource, amount, capacity) in enumerate(debits):
        used = conn.execute(select(resource_usage.c.used).where(resource_usage.c.scope == scope,
                                                                resource_usage.c.resource == resource)).scalar()
        if float(used or 0.0) + amount > capacity:
            return i
    return 0
