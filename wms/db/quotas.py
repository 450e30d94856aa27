"""Usage of resource quota rule instances (debit scopes ``rqs:set/rule:instance``)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, bindparam, select, text, update

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
    """Debit every (scope, resource, amount, capacity) if each fits; None if all did, else the index of one
    that did not (the caller rolls the whole transaction back, undoing the others).

    SQLite, which has no row locks and pays for every statement, gets one
    statement for all. PostgreSQL gets one too, an UPDATE joined with the
    arrays of keys: its plan (a nested loop over the arrays, each row found
    by primary key) takes the rows in the arrays' (key) order; should a
    plan ever differ, a deadlock is detected and the claim retried.
    MariaDB gets one primary-key update per row, in the given (key) order.
    A plain multi-row UPDATE would lock its rows in whatever order its
    plan finds them, so two claims could wait on each other.
    The rows must exist (``ensure_usage_rows``) and be distinct.
    """
    if not debits:
        return None
    if conn.dialect.name == "postgresql":
        return _debit_all_postgresql(conn, debits)
    if conn.dialect.name != "sqlite":
        for i, (scope, resource, amount, capacity) in enumerate(debits):
            if not _debit_one(conn, scope, resource, amount, capacity):
                return i
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


_DEBIT_ONE = (
    update(resource_usage)
    .where(resource_usage.c.scope == bindparam("b_scope"), resource_usage.c.resource == bindparam("b_resource"),
           resource_usage.c.used + bindparam("amount") <= bindparam("capacity"))
    .values(used=resource_usage.c.used + bindparam("amount"))
)


def _debit_one(conn: Connection, scope: str, resource: str, amount: float, capacity: float) -> bool:
    params = {"b_scope": scope, "b_resource": resource, "amount": amount, "capacity": capacity}
    return conn.execute(_DEBIT_ONE, params).rowcount == 1


_PG_DEBIT = text(
    "UPDATE resource_usage AS u SET used = u.used + v.amount "
    "FROM unnest(CAST(:scopes AS TEXT[]), CAST(:resources AS TEXT[]), CAST(:amounts AS DOUBLE PRECISION[]), "
    "CAST(:capacities AS DOUBLE PRECISION[])) AS v(scope, resource, amount, capacity) "
    "WHERE u.scope = v.scope AND u.resource = v.resource AND u.used + v.amount <= v.capacity "
    "RETURNING u.scope, u.resource"
)


def _debit_all_postgresql(conn: Connection, debits: Sequence[tuple[str, str, float, float]]) -> int | None:
    params = {"scopes": [d[0] for d in debits], "resources": [d[1] for d in debits],
              "amounts": [float(d[2]) for d in debits], "capacities": [float(d[3]) for d in debits]}
    done = {(scope, resource) for scope, resource in conn.execute(_PG_DEBIT, params).all()}
    if len(done) == len(debits):
        return None
    return next(i for i, d in enumerate(debits) if (d[0], d[1]) not in done)
