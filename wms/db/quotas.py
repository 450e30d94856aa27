"""Usage of resource quota rule instances (debit scopes ``rqs:set/rule:instance``)."""

from __future__ import annotations

from sqlalchemy import Connection, select

from wms.db.schema import resource_usage


def quota_usage(conn: Connection) -> list[tuple[str, str, float]]:
    """(scope, resource, used) of every rule instance in use."""
    stmt = select(resource_usage.c.scope, resource_usage.c.resource, resource_usage.c.used).where(
        resource_usage.c.scope.like("rqs:%"), resource_usage.c.used > 0)
    return [(s, r, float(u)) for s, r, u in conn.execute(stmt).all()]
