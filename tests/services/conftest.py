from __future__ import annotations

import pytest

from tests.helpers import ADMIN, default_config
from wms.core.match.context import PilotRequest
from wms.services import jobs as jobs_service
from wms.services.runtime import Runtime


@pytest.fixture
def runtime(engine) -> Runtime:
    """A runtime on the default configuration and the parametrised database."""
    return Runtime.create(default_config(), engine)


def pilot(pilot_id: str) -> PilotRequest:
    """A one-slot pilot's request at the local queue of the configuration."""
    return PilotRequest(site="DIRAC.Local.ch", ce="localhost", queue="default", host="wn01", pilot_id=pilot_id,
                        platform="x86_64-el9", cpu_time_left=200000, slots=1)


def row(runtime: Runtime, job_id: int) -> dict:
    """The job's row as the jobs list shows it to a manager."""
    [found] = jobs_service.visible_jobs(runtime, ADMIN, [job_id])
    return found
