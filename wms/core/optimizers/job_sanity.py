"""JobSanity: the first executor. Who owns the job, and is it well formed?

Owner and group come from the bearer token (a JDL may name its
OwnerGroup only if it is the token's); CPUTime gets its default and is
checked against the Operations bounds; Site/BannedSite must name known
sites and leave something to run on; Grid Engine resource requests must
name requestable complex attributes with values of their type; a
ParallelEnvironment or Project must be configured in cluster.yaml.
"""

from __future__ import annotations

from wms.core.complexes import validate_requests
from wms.core.errors import InvalidInput, JDLError
from wms.core.optimizers.base import ChainEnv, Job, register


@register
class JobSanity:
    name = "JobSanity"

    def process(self, job: Job, env: ChainEnv) -> None:
        desc = job.description
        ident = job.identity

        def refuse(message: str) -> None:
            raise JDLError(message, where=job.source)

        group = desc.owner_group or ident.group
        if group != ident.group:
            refuse(f"OwnerGroup: {group!r} is not your group ({ident.group!r})")
        job.owner, job.owner_group, job.vo = ident.user, group, ident.vo
        job.updates.update(Owner=job.owner, OwnerGroup=group, VirtualOrganisation=job.vo)

        limits = env.operations.JobDescription
        cpu_time = desc.cpu_time if desc.cpu_time is not None else limits.DefaultCPUTime
        if not limits.MinCPUTime <= cpu_time <= limits.MaxCPUTime:
            refuse(f"CPUTime: {cpu_time} is outside the allowed range {limits.MinCPUTime}..{limits.MaxCPUTime}")
        job.cpu_time = cpu_time
        job.updates["CPUTime"] = cpu_time

        known_sites = {ref.site for ref in env.resources_for(job.vo).queues()}
        for attribute, names in (("Site", desc.sites), ("BannedSite", desc.banned_sites)):
            for site in names:
                if site not in known_sites:
                    refuse(f"{attribute}: unknown site {site!r}")
        banned = set(desc.banned_sites)
        job.banned_sites = sorted(banned)
        job.sites = sorted(set(desc.sites) - banned)
        if desc.sites and not job.sites:
            refuse("Site and BannedSite exclude each other: every requested site is banned")

        # Grid Engine requests must name requestable attributes and read in
        # their types (complex(5)); refused here rather than never matched.
        try:
            job.hard_requests = validate_requests(env.complexes, desc.resource_requests, where="ResourceRequests")
            job.soft_requests = validate_requests(env.complexes, desc.soft_resource_requests,
                                                  where="SoftResourceRequests")
        except InvalidInput as exc:
            refuse(str(exc))

        pe = desc.parallel_environment
        if pe is not None and pe not in env.cluster.pes:
            refuse(f"ParallelEnvironment: unknown parallel environment {pe!r}")
        if desc.project is not None and desc.project not in env.cluster.projects:
            refuse(f"Project: unknown project {desc.project!r}")
