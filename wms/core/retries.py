"""Retries a JDL asks for: ``MaxRetries = N; RetryOnExitCodes = {c1, c2, ..};``.

A job its pilot reports Failed with a non-zero exit code is run again as a
new attempt when the code is one RetryOnExitCodes lists (any non-zero code
when it lists none), as long as the job has gone back to Waiting fewer than
MaxRetries times and fewer than ``max_reschedule`` times. The count is the
job's reschedule count, which reschedules by hand and lost hand-outs raise
too: MaxRetries bounds the new attempts of every kind, as max_reschedule
does, so that no path runs a job more often than its owner asked; an
operator's ``wms reschedule --reset`` starts it again. A job that failed
without an exit code (a lost pilot, a failed sandbox) is not retried: the
payload never said it may succeed the next time.
"""

from __future__ import annotations

from wms.core.jdl import JobDescription


def retry_reason(description: JobDescription, exit_code: int | None, reschedule_count: int,
                 max_reschedule: int) -> str | None:
    """The history's reason for running the failed job again, or None when it is not retried."""
    if not description.max_retries or exit_code is None or exit_code == 0:
        return None
    codes = description.retry_on_exit_codes
    if codes and exit_code not in codes:
        return None
    if reschedule_count >= min(description.max_retries, max_reschedule):
        return None
    return f"Retry {reschedule_count + 1} of {description.max_retries}: exit code {exit_code}"
