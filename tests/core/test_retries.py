"""MaxRetries and RetryOnExitCodes: read and checked from the JDL, and the rule
that says whether a job its pilot reported Failed runs again (wms/core/retries.py)."""

from __future__ import annotations

import pytest

from wms.core.errors import JDLError
from wms.core.jdl import MAX_RETRIES, parse_one
from wms.core.retries import retry_reason

RETRIED = '[ Executable = "run.sh"; MaxRetries = 2; RetryOnExitCodes = {3, 75}; ]'


def test_the_retry_attributes_are_read() -> None:
    job = parse_one(RETRIED)
    assert (job.max_retries, job.retry_on_exit_codes) == (2, [3, 75])


def test_a_job_without_them_is_never_retried() -> None:
    job = parse_one('[ Executable = "run.sh"; ]')
    assert (job.max_retries, job.retry_on_exit_codes) == (0, [])
    assert retry_reason(job, 3, 0, 3) is None


def test_one_exit_code_may_stand_alone() -> None:
    assert parse_one('[ Executable = "x"; MaxRetries = 1; RetryOnExitCodes = 75; ]').retry_on_exit_codes == [75]


@pytest.mark.parametrize(("jdl", "message"), [
    ('MaxRetries = -1;', r"MaxRetries: expected an integer from 0 to 10, got -1"),
    ('MaxRetries = "often";', r"MaxRetries: expected an integer from 0 to 10, got \"often\""),
    (f'MaxRetries = {MAX_RETRIES + 1};', r"MaxRetries: at most 10 retries, got 11"),
    ('MaxRetries = 1; RetryOnExitCodes = {0};', r"RetryOnExitCodes: expected exit codes from 1 to 255"),
    ('MaxRetries = 1; RetryOnExitCodes = {3, 256};', r"RetryOnExitCodes: .* got 256"),
    ('MaxRetries = 1; RetryOnExitCodes = {"3"};', r"RetryOnExitCodes: .* got \"3\""),
    ('RetryOnExitCodes = {3};', r"RetryOnExitCodes: names exit codes to retry on, but MaxRetries is not set"),
])
def test_wrong_retry_attributes_are_refused_with_their_place(jdl: str, message: str) -> None:
    with pytest.raises(JDLError, match=message) as caught:
        parse_one(f'[ Executable = "x"; {jdl} ]', "job.jdl")
    assert "job.jdl:1:" in str(caught.value)


def test_a_listed_exit_code_is_retried_up_to_max_retries() -> None:
    job = parse_one(RETRIED)
    assert retry_reason(job, 3, 0, 3) == "Retry 1 of 2: exit code 3"
    assert retry_reason(job, 75, 1, 3) == "Retry 2 of 2: exit code 75"
    assert retry_reason(job, 75, 2, 3) is None


def test_an_exit_code_not_listed_is_not_retried() -> None:
    job = parse_one(RETRIED)
    assert retry_reason(job, 1, 0, 3) is None


def test_without_a_list_any_non_zero_exit_code_is_retried() -> None:
    job = parse_one('[ Executable = "x"; MaxRetries = 1; ]')
    assert retry_reason(job, 1, 0, 3) == "Retry 1 of 1: exit code 1"
    assert retry_reason(job, 0, 0, 3) is None       # failed with 0: its output sandbox, say; not the payload
    assert retry_reason(job, None, 0, 3) is None    # no exit code: a lost job


def test_max_reschedule_bounds_the_retries_too() -> None:
    job = parse_one('[ Executable = "x"; MaxRetries = 5; ]')
    assert retry_reason(job, 1, 1, 2) is not None
    assert retry_reason(job, 1, 2, 2) is None
