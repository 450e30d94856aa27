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
