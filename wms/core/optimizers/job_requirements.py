"""JobRequirements: the RFC #7 executor (specs/002).

Canonicalises the job's Requirements, hashes them into a SubmitPool,
computes the pool's eligible queues once per batch (``env.pools``) and
records the pool on the job. The service stores the pool, its queues
with a timestamp, and the job's SubmitPool attribute.
"""

from __future__ import annotations

from wms.core import pools
from wms.core.errors import InvalidInput, JDLError
from wms.core.optimizers.base import ChainEnv, Job, PoolInfo, register
from wms.core.requirements import canonical_requirements


@register
class JobRequirements:
    name = "JobRequirements"

    def process(self, job: Job, env: ChainEnv) -> None:
        desc = job.description
        if desc.requirements is not None:
            try:
                canonical = canonical_requirements(desc.requirements, env.parameter_types)
            except InvalidInput as exc:
                raise JDLError(str(exc), where=job.source) from exc
            document = pools.pool_document(job.vo, requirements=canonical)
        elif desc.requirements_expr is not None:
            try:
                my = pools.job_ad(desc.requirements_expr, desc.attributes)
            except InvalidInput as exc:     # the classad library refuses to read the expression's names
                raise JDLError(str(exc), where=job.source) from exc
            document = pools.pool_document(job.vo, expression=desc.requirements_expr, my=my)
        else:
            return
        pool_id = pools.pool_id(document)
        pool = env.pools.get(pool_id)
        if pool is None:
            try:
                queues = pools.pool_queues(document, env.resources_for(job.vo), env.parameter_types,
                                           evaluation_limit=env.settings.limits.evaluation_ms / 1000)
            except InvalidInput as exc:     # the expression raises on a queue's parameters
                raise JDLError(str(exc), where=job.source) from exc
            pool = PoolInfo(pool_id, document, job.vo, tuple(queues))
            env.pools[pool_id] = pool
        job.pool = pool
        job.updates["SubmitPool"] = pool_id
