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
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from wms.core import classad
from wms.core.requirements import check_queue, eligible_queues, submit_pool_id
from wms.core.resources import QueueRef, Resources

EXPRESSION_KEY = "expression"
REQUIREMENTS_KEY = "requirements"


def pool_document(vo: str, *, requirements: Mapping[str, Any] | None = None, expression: str | None = None) -> dict:
    """The stored definition of a pool: its VO plus canonical requirements or an expression."""
    if (requirements is None) == (expression is None):
        raise ValueError("a pool has either RFC #7 requirements or an expression")
    doc: dict[str, Any] = {"vo": vo}
    if requirements is not None:
        doc[REQUIREMENTS_KEY] = dict(requirements)
    else:
        doc[EXPRESSION_KEY] = expression
    return doc


def pool_id(document: Mapping[str, Any]) -> str:
    """The SubmitPool identifier: the requirements digest, taken over the whole document."""
    return submit_pool_id(document)


def document_text(document: Mapping[str, Any]) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def pool_queues(document: Mapping[str, Any], resources: Resources, types: Mapping[str, str]) -> list[QueueRef]:
    """Every queue of ``resources`` eligible for the pool, sorted."""
    if REQUIREMENTS_KEY in document:
        return eligible_queues(document[REQUIREMENTS_KEY], resources, types)
    expression = document[EXPRESSION_KEY]
    return [
        ref
        for ref in resources.queues()
        if classad.eval_bool(expression, {}, resources.queue_parameters(ref)) is not False
    ]


def queue_rejection(document: Mapping[str, Any], params: Mapping[str, Any], types: Mapping[str, str]) -> str | None:
    """Why one queue is not in the pool (None when it is): for diagnostics."""
    if REQUIREMENTS_KEY in document:
        return check_queue(document[REQUIREMENTS_KEY], params, types)
    if classad.eval_bool(document[EXPRESSION_KEY], {}, params) is False:
        return "Requirements expression is false for this queue"
    return None
