"""The pilot: shipped to worker nodes, standard library only.

It describes the node it runs on, asks the Matcher for jobs of the
SubmitPools its queue serves, runs them and reports their state.

Modules:
    probe   the node's description (cores, memory, load, Grid Engine arch,
            DIRAC platform, host name), pure functions over /proc and /etc
    client  the JSON/HTTP client of the API contract (bearer token, retries,
            the server's error detail, HTTP 409 as JobLost)
    runner  one job: working directory, child process group, limits
            (h_rt, s_rt, cpu_time), heartbeats, output tail, final report
    orphans payloads die with the pilot: a watchdog process and a registry
            of job sessions that a later pilot on the node cleans up
    credentials  the token: read from a file or the environment, renewed
            before it expires
    logs    log lines with time, pilot id and job id
    main    ``wms-pilot``: options, slot workers, lifecycle, signals

Nothing here may import outside the standard library: the package is
copied to worker nodes as it is (``python -m pilot`` also works from a
zipapp whose root ``__main__.py`` calls
``sys.exit(pilot.main.main())``; zipapp's own ``-m`` template drops the
exit code).
"""

# The version of the wms release this pilot ships with (pilot/ imports nothing of wms; a test keeps them equal).
__version__ = "0.1.0"
