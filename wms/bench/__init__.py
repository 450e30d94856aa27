"""The load generators of `wms bench`: submission (submit), the Matcher
in-process (match), over HTTP as pilots see it (over_http), and short jobs
end to end through a server and real pilots (e2e; beside a private Slurm,
against_slurm and slurm); each fills a scratch database and prints what it
measured (docs/benchmarks.md)."""

from wms.bench.submit import run_bench

__all__ = ["run_bench"]
