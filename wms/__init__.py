"""A pilot / task-queue workload management system with Grid Engine resource policy."""

__version__ = "0.1.0"
