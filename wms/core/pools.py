"""SubmitPools: which queues can ever run a set of requirements.

DIRAC RFC #7 (specs/002, "SubmitPool"): a job's Requirements are sorted,
canonicalised and hashed; the hash identifies the pool, and the pool's
eligible queues are computed from the Resources configuration. Both the
optimizer chain (a new pool) and the periodic refresher (every pool) use
``pool_queues`` below, so the rule lives in one place.

Two decisions beyond the RFC, written down in docs/architecture.md:

* The VO is part of the pool identity. Queue parameters may be given per
  VO, so the same requirements can select different queues for two VOs;
  hashing the VO with the requirements keeps one pool = one queue set.
* A ClassAd Requirements *expression* (specs/004) also gets a pool: its
  normalised text is hashed, and a queue is eligible unless the
  expression is False against the queue's static parameters. Undefined
  means "depends on the pilot" and is decided at match time.
* The expression is evaluated with the job's own ad as MY and the
  queue's (or the pilot's) ad as TARGET, as ClassAd matchmaking does
  (specs/004; HTCondor's language): ``my.X`` reads the job, ``other.X``
  the resource, and an unscoped ``X`` the job first, then the resource.
  The job's ad kept with the expression is only what the expression reads
  of it (``job_ad``), so it is part of the pool's identity: two jobs with
  ``MinMem = 2000`` and ``MinMem = 3000`` under the same expression are
  two pools, and jobs that differ elsewhere (their Arguments) share one.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from wms.core import classad, evaluation
from wms.core.requirements import check_queue, eligible_queues, submit_pool_id
from wms.core.resources import QueueRef, Resources

EXPRESSION_KEY = "expression"
REQUIREMENTS_KEY = "requirements"
#: The job's own ad for the expression (the ClassAd text of a record), when it reads any of it.
JOB_AD_KEY = "my"
#: The job attribute that holds the expression: never part of its own ad.
REQUIREMENTS_ATTRIBUTE = "Requirements"


def job_ad(expression: str, attributes: Mapping[str, Any]) -> str | None:
    """The job's ad as its Requirements expression reads it: the ClassAd
    text of the job attributes it names (``my.X`` or an unscoped ``X`` the
    job defines, and what those read in turn), or None when it reads none.

    Unscoped names the job does not define are left to the resource's ad,
    as the evaluation itself does.
    """
    record = classad.own_record(expression, attributes, leave_out=(REQUIREMENTS_ATTRIBUTE,))
    return classad.render_value(record) if record else None


def pool_document(vo: str, *, requirements: Mapping[str, Any] | None = None, expression: str | None = None,
                  my: str | None = None) -> dict:
    """The stored definition of a pool: its VO plus canonical requirements or
    an expression (with the job's ad it reads, ``my``, when it reads one)."""
    if (requirements is None) == (expression is None):
        raise ValueError("a pool has either RFC #7 requirements or an expression")
    doc: dict[str, Any] = {"vo": vo}
    if requirements is not None:
        doc[REQUIREMENTS_KEY] = dict(requirements)
    else:
        doc[EXPRESSION_KEY] = expression
        if my:      # only when there is one: the pools of expressions that read no job attribute keep their ids
            doc[JOB_AD_KEY] = my
    return doc


def pool_id(document: Mapping[str, Any]) -> str:
    """The SubmitPool identifier: the requirements digest, taken over the whole document."""
    return submit_pool_id(document)


def document_text(document: Mapping[str, Any]) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def pool_queues(
    document: Mapping[str, Any], resources: Resources, types: Mapping[str, str], *, strict: bool = True,
    evaluation_limit: float | None = None,
) -> list[QueueRef]:
    """Every queue of ``resources`` eligible for the pool, sorted.

    An expression the ClassAd library raises on (a ClassAdEvalError) is
    refused when ``strict`` (a submission: the user hears why); else (the
    periodic refresh of stored pools) it keeps the queue, as Undefined
    does: the match decides, and denies with the library's reason.

    With ``evaluation_limit`` (seconds against one queue; a submission) the
    expression is timed as it is evaluated, and one over the budget is
    refused with its figure (wms.core.evaluation: OverBudget).
    """
    if REQUIREMENTS_KEY in document:
        return eligible_queues(document[REQUIREMENTS_KEY], resources, types)
    expression = document[EXPRESSION_KEY]
    my = document.get(JOB_AD_KEY)
    refs = resources.queues()

    def verdict(ref: QueueRef) -> bool | None:
        try:
            return classad.eval_bool(expression, my, resources.queue_parameters(ref), where="Requirements")
        except classad.ClassAdEvalError:
            if strict:
                raise
            return None

    if evaluation_limit is None:
        verdicts = [verdict(ref) for ref in refs]
    else:
        verdicts = evaluation.within_budget(refs, verdict, evaluation_limit, "Requirements")
    return [ref for ref, v in zip(refs, verdicts) if v is not False]


def queue_rejection(document: Mapping[str, Any], params: Mapping[str, Any], types: Mapping[str, str]) -> str | None:
    """Why one queue is not in the pool (None when it is): for diagnostics."""
    if REQUIREMENTS_KEY in document:
        return check_queue(document[REQUIREMENTS_KEY], params, types)
    try:
        verdict = classad.eval_bool(document[EXPRESSION_KEY], document.get(JOB_AD_KEY), params,
                                    where="Requirements")
    except classad.ClassAdEvalError as exc:     # a stored expression: explained, not an error of the caller
        return f"Requirements expression cannot be evaluated on this queue: {exc.message}"
    if verdict is False:
        return "Requirements expression is false for this queue"
    return None
