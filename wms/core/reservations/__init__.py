"""Grid Engine advance reservations (specs/003), pure logic.

* ``timespec``: date_time ``[[CC]YY]MMDDhhmm[.SS]`` and the window (-a, -e, -d);
* ``states``: the AR states and the transitions between them;
* ``access``: who may create a reservation, who may use a queue (user_lists);
* ``calendar``: usage of every resource over time, as a step function;
* ``grant``: choosing queues and booking what a reservation asks for;
* ``ids``: the id range and its wraparound.

Nothing here does I/O: the services read the database and the
configuration, call these functions, and store what they decide.
"""
