"""File contracts the orchestrator writes (metadata/*.json, category_data/*.json)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class StepTiming(BaseModel):
    step: str
    started_at: datetime
    finished_at: datetime
    seconds: float


class AgentTiming(BaseModel):
    agent: str
    tier: str
    status: str
    attempts: int
    started_at: datetime | None
    finished_at: datetime | None


class RunMetadata(BaseModel):
    tracelake_version: str
    trace_path: str
    trace_id: str | None = None
    platform: str | None = None
    platform_source: str | None = None  # flag (--platform) | tag | trace device | assumed (no known device named)
    mode: str | None = None
    mode_reason: str | None = None
    comparison_scope: str = "standalone"
    trace2_path: str | None = None  # comparative scope: the target trace
    trace2_id: str | None = None
    platform2: str | None = None
    platform2_source: str | None = None
    agents_runner: str = "deterministic"
    out_dir: str
    warehouse: str
    started_at: datetime
    finished_at: datetime | None = None
    steps: list[StepTiming] = Field(default_factory=list)
    agents: list[AgentTiming] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class JobRunMetadata(RunMetadata):
    """metadata/run.json of a job's analysis (tracelake/job_pipeline.py): trace_path is the job's
    folder, or the files' common folder."""

    comparison_scope: str = "job"
    job: str | None = None
    world_size: int | None = None
    ranks: list[int] = Field(default_factory=list)  # the ranks present, ascending
    missing_ranks: list[int] = Field(default_factory=list)
    node_count: int | None = None
    rank_reports: list[str] = Field(default_factory=list)  # ranks/rank<r>, below the job's folder


class QualityCheck(BaseModel):
    check_name: str
    value: float | None
    threshold: float | None
    verdict: str
    detail: str


class QualityGate(BaseModel):
    checks: list[QualityCheck]
    gpu_events_present: bool
    cpu_ops_present: bool
    graph_replay_without_capture: bool
    run_system_tier: bool
    run_compute_tier: bool
    skipped_steps: list[str]
    # what a GPU graph replay without (matching) capture traces keeps the analysis from attributing
    graph_replay_steps: list[str] = Field(default_factory=list)
    # the trace is not the workload (a micro-benchmark / harness, a GPU-graph capture): what the
    # report opens with (agents/trace_scope.py); empty for a workload trace
    workload_limits: list[str] = Field(default_factory=list)


class GpuUtilization(BaseModel):
    total_time_ms: float = 0.0
    computation_time_ms: float = 0.0
    exposed_comm_time_ms: float = 0.0
    exposed_memcpy_time_ms: float = 0.0
    busy_time_ms: float = 0.0
    idle_time_ms: float = 0.0
    computation_time_percent: float = 0.0
    exposed_comm_time_percent: float = 0.0
    exposed_memcpy_time_percent: float = 0.0
    idle_time_percent: float = 0.0


class CategoryEntry(BaseModel):
    name: str
    display_name: str
    tier: str
    agent: str
    ops_count: int
    gpu_kernel_time_ms: float
    files: list[str]


class CategoryManifest(BaseModel):
    platform: str
    trace_path: str
    comparison_scope: str
    gpu_utilization: GpuUtilization
    categories: list[CategoryEntry]
    trace2_gpu_utilization: GpuUtilization | None = None
    trace2_ops_summary_by_category: list[dict[str, Any]] | None = None


class CategoryMetadata(BaseModel):
    category: str
    display_name: str
    agent: str
    tier: str
    op_categories: list[str]
    platform: str
    platform_spec: dict[str, Any]
    gpu_utilization: GpuUtilization
    trace_id: str
