"""Several server processes granting reservations at the same moment: the
per-scope lock rows let no two of them book the same slots."""

from __future__ import annotations

import multiprocessing
from datetime import datetime, timedelta, timezone

import pytest

from tests.reservations_config import reservation_config

pytestmark = pytest.mark.databases

PROCESSES = 6
GRANTS = 2
T0 = datetime(2030, 12, 14, 10, 0, tzinfo=timezone.utc)


def grant_process(url: str, config_dir: str, barrier, results) -> None:
    from wms.config import load_config
    from wms.db.engine import make_engine
    from wms.services import reservations as ar
    from tests.reservations_config import USER1
    from wms.services.runtime import Runtime

    engine = make_engine(url, pool_size=2)
    runtime = Runtime.create(load_config(config_dir), engine)
    barrier.wait(timeout=60)
    granted = []
    for _ in range(GRANTS):
        spec = ar.ReservationSpec(start=T0 + timedelta(hours=2), duration="1:0:0", queues=["other.q"])
        try:
            granted.append(ar.submit(runtime, USER1, spec, T0)["ar_id"])
        except ar.ReservationDenied:
            pass
    engine.dispose()
    results.put(granted)


def test_parallel_grants_never_overbook(engine, db_url, tmp_path):
    reservation_config(tmp_path / "config")    # writes the configuration the processes load
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    barrier = context.Barrier(PROCESSES)
    processes = [context.Process(target=grant_process, args=(db_url, str(tmp_path / "config"), barrier, results))
                 for _ in range(PROCESSES)]
    for p in processes:
        p.start()
    granted = [ar_id for _ in processes for ar_id in results.get(timeout=120)]
    for p in processes:
        p.join(timeout=60)
        assert p.exitcode == 0
    # other.q has 4 slots: 4 one-slot reservations for the same hour, no more.
    assert len(granted) == len(set(granted)) == 4
