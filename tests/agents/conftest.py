from __future__ import annotations

import pytest

from tests.helpers import default_config
from wms.services.runtime import Runtime


@pytest.fixture
def runtime(engine) -> Runtime:
    return Runtime.create(default_config(), engine)
