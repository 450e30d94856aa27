"""The optimizer chain: executors that check a job and prepare its task queue.

Each executor is a small class with a ``name`` and ``process(job, env)``;
the chain is the list of names in wms.yaml (``optimizers``). Executors are
pure: they read the job and the configuration and record what must be
stored (pools, task queue definitions) on the job; the submission service
writes all of it in one transaction afterwards.
"""

from wms.core.optimizers.base import ChainEnv, Executor, Job, PoolInfo, build_chain, registry
from wms.core.optimizers.job_requirements import JobRequirements
from wms.core.optimizers.job_sanity import JobSanity
from wms.core.optimizers.job_scheduling import JobScheduling
from wms.core.optimizers.task_queue import TaskQueue

__all__ = [
    "ChainEnv",
    "Executor",
    "Job",
    "JobRequirements",
    "JobSanity",
    "JobScheduling",
    "PoolInfo",
    "TaskQueue",
    "build_chain",
    "registry",
]
