"""What an analysis knows about its trace(s) before any agent runs, read from the marts once:
platform, run mode, quality gate, GPU utilization, workload facts and serving phases."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import duckdb

from tracelake.agents.trace_scope import opening_sentences
from tracelake.analyzers import trace_overview
from tracelake.analyzers.contracts import AnalysisContext, RunMode, TracePhases, WorkloadFacts
from tracelake.platforms import load_platforms
from tracelake.run_contracts import GpuUtilization, QualityCheck, QualityGate

RUNTIME_NAMES = {"cuda": "CUDA", "rocm": "ROCm"}  # traces.platform_assumed_for, as a warning names it


@dataclass(frozen=True)
class PlatformChoice:
    name: str
    source: str  # flag (--platform) | tag (the platform tag) | trace device | assumed (no known device named)
    warning: str | None  # assumed, or a flag that is not the trace's device, when the trace has GPU events
    device_name: str | None  # the trace's own device, as the report title names an assumed roofline's GPU
    roofline_gpu: str = "this GPU"  # AnalysisContext.roofline_gpu

    @property
    def assumed(self) -> bool:
        return self.source == "assumed"


@dataclass(frozen=True)
class TraceFacts:
    """One trace's facts: those both traces of a comparison have."""

    trace_id: str
    platform: PlatformChoice
    gate: QualityGate
    gpu: GpuUtilization


@dataclass(frozen=True)
class AnalysisFacts:
    trace: TraceFacts
    trace2: TraceFacts | None  # comparative scope: the target trace
    mode: str | None
    mode_reason: str
    workload: WorkloadFacts
    phases: TracePhases
    platform_specs: dict[str, dict[str, Any]]  # every platform row, by name

    @property
    def comparative(self) -> bool:
        return self.trace2 is not None

    @property
    def platform_spec(self) -> dict[str, Any]:
        return self.platform_specs[self.trace.platform.name]

    def context(self) -> AnalysisContext:
        """What every analyzer is handed besides the warehouse."""
        trace, gpu = self.trace, self.trace.gpu
        return AnalysisContext(
            trace_id=trace.trace_id, platform=trace.platform.name, mode=cast(RunMode | None, self.mode),
            comparison_scope="comparative" if self.comparative else "standalone",
            trace2_id=self.trace2.trace_id if self.trace2 else None,
            platform2=self.trace2.platform.name if self.trace2 else None,
            e2e_time_ms=_analysis_window_ms(gpu, self.workload), computation_time_ms=gpu.computation_time_ms,
            roofline_gpu=trace.platform.roofline_gpu, platform_source=trace.platform.source,
            vendor=self.platform_spec.get("vendor"),
            quality_verdicts={c.check_name: c.verdict for c in trace.gate.checks},
            facts=self.workload, phases=self.phases)


def trace_platform(db: duckdb.DuckDBPyConnection, trace_id: str, chosen: str | None,
                   label: str, option: str) -> PlatformChoice:
    """The platform given (--platform), else the platform tag when it names a platform row, else the
    one the trace's device name matches, else the default, assumed: one warning line says which
    roofline was assumed and how to choose, and so does one for a roofline of another device."""
    device = trace_overview.trace_device(db, trace_id)
    detected, device_name, gpu_events = device["platform"], device["device_name"], device["gpu_event_count"]
    tagged = _known_platform(device["platform_tag"])
    platform = chosen or tagged or detected
    source = "flag" if chosen else ("tag" if tagged else device["platform_source"])
    warning = None
    # without GPU events no roofline is drawn, so an assumed platform is nothing to warn about
    if source == "assumed" and gpu_events:
        named = f"its device {device_name!r} is not in the platforms seed" if device_name else "it names no device"
        runtime = RUNTIME_NAMES.get(device["platform_assumed_for"] or "")
        default = f"the default for a {runtime} trace" if runtime else "the default when its runtime is not known either"
        warning = (f"{label}: roofline assumed {platform} ({default}), {named}; pass {option} PLATFORM to read it "
                   f"against its GPU (tracelake platforms lists them)")
    is_detected = device["platform_source"] == "trace device"
    if source in ("flag", "tag") and is_detected and platform != detected and gpu_events:
        given = f"{option} {platform}" if source == "flag" else f"the platform tag {platform}"
        warning = (f"{label} ran on {device_name} ({detected}), but its roofline is read against {platform} "
                   f"({given}): every % of roofline, ridge point and attainable share is {platform}'s, not this GPU's")
    # a flag or tag on a trace naming no known device is the user naming its GPU
    named_gpu = (is_detected and platform == detected) or (not is_detected and source in ("flag", "tag"))
    roofline_gpu = ("this GPU" if named_gpu else
                    f"{platform}, assumed (this trace's GPU is not known)" if source == "assumed" else
                    f"{platform} (the roofline's platform, not this trace's GPU)")
    return PlatformChoice(platform, source, warning, device_name, roofline_gpu)


def _known_platform(name: str | None) -> str | None:
    """A platform tag's platform row, when it names one (a tag may be any label, e.g. a cluster's)."""
    if not name:
        return None
    return next((p.platform for p in load_platforms() if p.platform.lower() == name.strip().lower()), None)


def quality_gate(db: duckdb.DuckDBPyConnection, trace_id: str, captures_given: bool) -> QualityGate:
    """Which analyses the trace supports (trace_quality mart), and what the report says it skipped."""
    checks = [QualityCheck(**row) for row in trace_overview.quality_checks(db, trace_id)]
    verdict = {c.check_name: c for c in checks}
    gpu_present = verdict.get("gpu_events_present") is not None and verdict["gpu_events_present"].verdict == "pass"
    cpu_present = verdict.get("cpu_ops_present") is not None and verdict["cpu_ops_present"].verdict == "pass"
    replay = verdict.get("graph_replay")
    # warn: replayed kernels the merge did not map (no capture traces, or none that match)
    graph_without_capture = replay is not None and replay.verdict == "warn"
    skipped = []
    unread = verdict.get("unrecognized_device_events")
    if not gpu_present and unread is not None and unread.value:
        skipped.append("GPU analyses (timeline, kernels, roofline, system and compute agents): none of the trace's "
                       f"GPU events is in a category TraceLake reads ({unread.detail.split(';')[0]}), so this report "
                       "covers its CPU ops only")
    elif not gpu_present:
        skipped.append("GPU analyses (timeline, kernels, roofline, system and compute agents): the trace has no GPU "
                       "events, so this report covers CPU ops only")
    elif not cpu_present:
        skipped.append("op-level compute analysis (roofline, per-op findings): the trace has no CPU ops, so only "
                       "kernel-level analysis is possible: kernels cannot be attributed to PyTorch ops or their shapes, "
                       "and categories come from kernel names")
    # a graph replay is how the workload ran, not a fault of the trace: said apart from the fallback
    replay_steps = []
    if graph_without_capture and not captures_given:
        replay_steps.append("per-op attribution inside the replays: no capture traces were given (--capture-folder), "
                            "so replayed kernels are attributed to the graph launch")
    elif graph_without_capture and replay is not None:
        replay_steps.append(f"per-op attribution of the replays the capture traces do not match: {replay.detail}")
    return QualityGate(
        checks=checks, gpu_events_present=gpu_present, cpu_ops_present=cpu_present,
        graph_replay_without_capture=graph_without_capture, run_system_tier=gpu_present,
        run_compute_tier=gpu_present and cpu_present, skipped_steps=skipped, graph_replay_steps=replay_steps,
        workload_limits=opening_sentences(c.model_dump() for c in checks),
    )


def gpu_utilization(db: duckdb.DuckDBPyConnection, trace_id: str) -> GpuUtilization:
    row = trace_overview.gpu_timeline(db, trace_id)
    if row is None:
        return GpuUtilization()
    return GpuUtilization(**{k: v for k, v in row.items() if k in GpuUtilization.model_fields and v is not None})


def _analysis_window_ms(gpu: GpuUtilization, facts: WorkloadFacts) -> float:
    """The E2E the impacts are % of: the measured timeline, less the idle at the profile window's
    edges (workload_facts.analysis_window_ms), which is outside every step and no change recovers."""
    if facts.window_edge_gap_count and facts.analysis_window_ms and facts.analysis_window_ms > 0:
        return facts.analysis_window_ms
    return gpu.total_time_ms


def run_mode(db: duckdb.DuckDBPyConnection, trace_id: str, requested: str) -> tuple[str | None, str]:
    """--mode when given, else runs.mode and its evidence (one detection, in the mart)."""
    if requested != "auto":
        return requested, f"--mode {requested}"
    return trace_overview.run_mode(db, trace_id)


def workload_facts(db: duckdb.DuckDBPyConnection, trace_id: str) -> tuple[WorkloadFacts, TracePhases]:
    return trace_overview.workload_facts(db, trace_id), trace_overview.trace_phases(db, trace_id)


def platform_specs() -> dict[str, dict[str, Any]]:
    return {spec.platform: spec.model_dump() for spec in load_platforms()}
