"""``python -m pilot``: the same as ``wms-pilot`` (handy when shipped as a zipapp)."""

import sys

from pilot.main import main

sys.exit(main())
