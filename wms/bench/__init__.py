"""The load generators of `wms bench`: submission (submit), the Matcher
in-process (match) and over HTTP as pilots see it (over_http); each fills a
scratch database and prints what it measured (docs/benchmarks.md)."""

from wms.bench.submit import run_bench

__all__ = ["run_bench"]
