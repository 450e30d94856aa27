"""Request bodies of the API (responses are plain JSON documents)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class JDLSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field("<jdl>", description="file name, used in error messages")
    text: str


class SubmitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    jdls: list[JDLSource] = Field(min_length=1)
    resource_requests: dict[str, Any] = Field(default_factory=dict, description="hard -l requests")
    soft_resource_requests: dict[str, Any] = Field(default_factory=dict, description="soft -l requests")
    parallel_environment: str | None = None
    slots: int | None = Field(None, ge=1, description="with parallel_environment: -pe PE N")
    reservation: int | None = Field(None, ge=1)
    project: str | None = None
    job_name: str | None = None


class JobIds(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job_ids: list[int] = Field(min_length=1)


class MatchQueuesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = "<jdl>"
    text: str


class JobRequest(BaseModel):
    """A pilot's resource description (requestJob)."""

    model_config = ConfigDict(extra="forbid")

    site: str = Field(min_length=1)
    ce: str = Field(min_length=1)
    queue: str = Field(min_length=1)
    host: str = Field(min_length=1)
    pilot_id: str = Field(min_length=1, max_length=255)
    pools: list[str] | None = None
    slots: int = Field(1, ge=1)
    load: dict[str, Any] = Field(default_factory=dict)
    platform: str | None = None
    cpu_time_left: float | None = Field(None, ge=0)
    tags: list[str] = Field(default_factory=list)


class PilotStatus(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pilot_id: str = Field(min_length=1)
    status: str
    minor_status: str = ""
    exit_code: int | None = None


class Heartbeat(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pilot_id: str = Field(min_length=1)


class JobOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pilot_id: str = Field(min_length=1)
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False


class ComplexFile(BaseModel):
    """A whole complex table in `qconf -sc` format (qconf -Mc)."""

    model_config = ConfigDict(extra="forbid")

    text: str
