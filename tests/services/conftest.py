from __future__ import annotations

import pytest

from tests.helpers import default_config
from wms.services.runtime import Runtime


@pytest.fixture
def runtime(engine) -> Runtime:
    """A runtime on the default configuration and the parametrised database."""
    return Runtime.create(default_config(), engine)
