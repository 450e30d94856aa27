"""Reading ClassAds keeps no memory: a server reads a job's JDL for every
match and evaluates Requirements against pilots' records, for months.

classad2 25 keeps about 150 bytes of native memory for every ClassAd its
constructor makes (wms/core/classad.py, _parse_ad): a server matching 800
jobs a second grew by 7 MB a minute. That memory is outside Python's heap,
so tracemalloc does not see it; the resident size of a fresh process does.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent("""
    import sys
    from wms.core import classad
    from wms.core.jdl import parse_one

    JDL = '[ Executable = "/bin/true"; CPUTime = 300; Arguments = "-n 5"; JobGroup = "mc" ]'
    CALLS = 40_000

    def read_jdl(i):
        parse_one(JDL)

    def evaluate(i):
        # a record not seen before each time: the cache of ads (1,024) turns over
        classad.eval_bool("other.Slots >= my.N", {"N": 1}, {"Slots": i})

    def resident_kib():
        return int(open("/proc/self/statm").read().split()[1]) * 4096 // 1024

    call = {"read_jdl": read_jdl, "evaluate": evaluate}[sys.argv[1]]
    for i in range(2_000):              # first use: imports, caches, the allocator's pools
        call(i)
    before = resident_kib()
    for i in range(CALLS):
        call(2_000 + i)
    print((resident_kib() - before) * 1024 / CALLS)
""")


@pytest.mark.parametrize("kind", ["read_jdl", "evaluate"])
def test_reading_and_evaluating_classads_keeps_no_memory(kind):
    done = subprocess.run([sys.executable, "-c", PROBE, kind], capture_output=True, text=True, timeout=300,
                          check=True)
    per_call = float(done.stdout.strip())
    # It was 144 bytes a call; a fresh process's allocator moves by a few.
    assert per_call < 16, f"{kind}: {per_call:.0f} bytes kept per call"
