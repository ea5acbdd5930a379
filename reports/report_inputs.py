"""Everything analysis.md shows, gathered by the pipeline: the renderer reads nothing from disk.

Every number in the report comes from one of these fields, and every field comes from the
warehouse or from an agent's metrics (SPEC §5 "analysis.md").
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from tracelake.analyzers.contracts import AgentResult, PriorityData, TracePhases
from tracelake.analyzers.model_id import ModelInfo

# A report can be rendered while its plot is still being drawn: plot_png_base64 is then this
# token, which reports.analysis_md.embed_plot() replaces with the PNG's base64 text. Its NULs make
# it one no trace string can spell: the report's escaping turns NUL into U+FFFD.
PLOT_PENDING = "\x00tracelake-plot-pending\x00"


class RankOfJob(BaseModel):
    """A rank report's place in its job: its header names the job and links to the job's report."""

    name: str  # the job's name (the `job` tag)
    rank: int
    world_size: int
    job_report: str = Field(default="../../analysis.md", pattern=r"^[A-Za-z0-9_./-]+$")  # relative link


class ReportInputs(BaseModel):
    """The inputs of ``render_analysis``; trace 1 is the baseline, trace 2 the target."""

    title_model: str  # model name for the title; "Workload" when unknown
    platform: str
    platform2: str | None = None
    # whose word each platform is (flag | tag | trace device | assumed) and the trace's own device:
    # the template says an assumed roofline is assumed wherever it names it or a % of roofline
    platform_source: str | None = None
    device_name: str | None = None
    platform2_source: str | None = None
    device2_name: str | None = None
    comparison_scope: Literal["standalone", "comparative"] = "standalone"
    mode: str  # runs.mode (training | inference, -graph for graph replays) or "unknown"
    mode_reason: str  # runs.mode_reason, or "--mode <mode>" when given
    trace_name: str
    trace_id: str
    job: RankOfJob | None = None  # the trace is a rank of a job analyzed as one (tracelake/job_pipeline.py)
    ts_base_us: int = 0  # traces.ts_base_us: what trace 1's stored timestamps are less (cards add it back)
    trace2_name: str | None = None
    trace2_id: str | None = None
    # gpu_timeline of trace 1: total_time_ms, computation_time_percent, idle_time_percent,
    # exposed_comm_time_percent, exposed_memcpy_time_percent, busy_time_ms, ..._ms
    gpu_utilization: dict[str, float]
    gpu_utilization2: dict[str, float] | None = None
    top_bottleneck_category: str
    top_bottleneck_category2: str | None = None
    priority: PriorityData
    agent_results: list[AgentResult] = Field(default_factory=list)
    # rows: name, category, count, time_ms, percent_of_e2e, pct_roofline (or None), bound (or None)
    top_operations: list[dict[str, Any]] = Field(default_factory=list)
    kernel_categories: list[dict[str, Any]] = Field(default_factory=list)  # GPU time by kernel category (no CPU ops)
    model_info: ModelInfo = Field(default_factory=ModelInfo)
    # display_name, kind (measured_max_achievable | vendor_peak), source, mem_bw_gbps, and the
    # peak TFLOPS per compute spec (nested under peaks_tflops / peak_tflops, or flat matrix_* keys)
    platform_spec: dict[str, Any] = Field(default_factory=dict)
    platform_spec2: dict[str, Any] | None = None
    quality_checks: list[dict[str, Any]] = Field(default_factory=list)  # check_name, value, threshold, verdict, detail
    warnings: list[str] = Field(default_factory=list)
    skipped_steps: list[str] = Field(default_factory=list)  # what the quality-gate fallback skipped, and why
    graph_replay_steps: list[str] = Field(default_factory=list)  # what a graph replay keeps from being attributed
    # the trace is not the workload (micro-benchmark / harness, GPU-graph capture): the report opens
    # with these sentences (agents/trace_scope.py)
    workload_limits: list[str] = Field(default_factory=list)
    reproduce_sql: list[tuple[str, str]] = Field(default_factory=list)  # (label, sql)
    plot_png_base64: str | None = None
    phases: TracePhases = Field(default_factory=TracePhases)  # the phases mart rows (serving steps)
    relabelled_ops_note: str | None = None  # e.g. "ops labelled other were analyzed as GEMM: ..."
    op_matching_note: str | None = None  # comparative: how many ops matched, what stayed unmatched
    # (markdown, its op names escaped by reports.comparative_report.matching_note)
