"""Resource Quota Sets (specs/001; sge_resource_quota(5)).

* ``model``: rule sets, rules, filters and limits as values;
* ``parser``: the rule-set language, errors naming the line;
* ``render``: the canonical, human-readable form rule sets are stored in;
* ``filters``: does a rule's filter match a job on a queue and host, and
  which instance (per expanded member) does it count in;
* ``evaluate``: the compiled rule sets a Matcher uses: for one job on one
  queue and host, the limits that apply and what the job would debit.

Pure logic, no I/O.
"""
