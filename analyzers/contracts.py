"""The contracts between analyzers, agents and reports. JSON on disk is model_dump_json()."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

Tier = Literal["system", "compute"]
EstimateMethod = Literal["quantified", "heuristic", "qualitative"]
Confidence = Literal["high", "medium", "low"]
AgentStatus = Literal["OK", "NO_DATA", "ERROR"]
# runs.mode, the `mode` tag and `analyze --mode`: what the run does and how its GPU work is issued
RunMode = Literal["training", "inference", "training-graph", "inference-graph"]
RUN_MODES: tuple[str, ...] = RunMode.__args__  # type: ignore[attr-defined]


class WorkloadFacts(BaseModel):
    """The workload_facts mart row of a trace: the facts the advice sentences are conditioned on."""

    has_rotary: bool = False
    rotary_example: str | None = None
    compiled_region_count: int = 0
    compiled_kernel_count: int = 0
    compiled_kernel_time_us: float = 0.0
    compiled_gpu_time_share: float = 0.0
    is_compiled: bool = False
    serving_engine_op_count: int = 0
    serving_engine_op_example: str | None = None
    serving_engine: str | None = None  # xDiT | SGLang | vLLM | diffusers, named from the trace's host events
    serving_engine_evidence: str | None = None
    serving_engine_graph_mode: str | None = None  # the engine's GPU-graph switch (vLLM without `enforce_eager`)
    window_edge_gap_count: int = 0
    window_edge_idle_us: float = 0.0
    analysis_window_ms: float | None = None


class ServingStep(BaseModel):
    """One row of the phases mart: a serving step, its phase, batch, tokens and GPU time."""

    step_index: int
    step_source: Literal["annotation", "profiler_step", "graph_launch", "whole_trace"]
    step_name: str
    phase: str | None = None  # prefill | decode | mixed | denoise | idle; None without annotations
    batch_size: int | None = None
    prefill_tokens: int | None = None
    decode_tokens: int | None = None
    kv_tokens: int | None = None
    host_time_ms: float
    kernel_count: int
    gpu_time_us: float
    gpu_busy_us: float
    gpu_idle_us: float
    gpu_busy_percent: float | None = None
    model_class: str | None = None  # the trace's model where the GPU time goes (phases.model_class)
    model_calls: int = 0  # its calls within the step: a diffusion request's denoising steps
    in_steady_state: bool
    steady_state_rule: str


class TracePhases(BaseModel):
    """The trace's serving steps (phases mart), in step order."""

    steps: list[ServingStep] = Field(default_factory=list)

    @property
    def is_serving(self) -> bool:
        """The steps come from serving-engine annotations (so they have phases)."""
        return any(s.step_source == "annotation" for s in self.steps)

    @property
    def phase_names(self) -> list[str]:
        return sorted({s.phase for s in self.steps if s.phase is not None})

    @property
    def single_phase(self) -> str | None:
        names = self.phase_names
        return names[0] if len(names) == 1 else None


class AnalysisContext(BaseModel):
    """What every analyzer knows besides the warehouse: which trace, platform and scope."""

    trace_id: str
    platform: str  # op_perf / roofline_summary rows are filtered to this platform
    mode: RunMode | None = None  # runs.mode (or --mode); None when the trace shows neither
    comparison_scope: Literal["standalone", "comparative"] = "standalone"
    trace2_id: str | None = None  # comparative scope: the target trace (trace 1 is the baseline)
    platform2: str | None = None  # comparative scope: trace 2's platform
    e2e_time_ms: float  # gpu_timeline.total_time_ms: the denominator of every "% of E2E"
    # the GPU whose roofline the % of roofline figures are read against, in words: "this GPU", or the
    # platform named when it is not the trace's device (--platform, or a device no platform row matches)
    roofline_gpu: str = "this GPU"
    # whose word `platform` is: flag (--platform) | tag | trace device | assumed (no device the seed knows)
    platform_source: str | None = None

    @property
    def roofline_assumed(self) -> bool:
        return self.platform_source == "assumed"
    vendor: str | None = None  # the roofline platform's vendor (platforms seed): whose libraries advice names
    computation_time_ms: float
    quality_verdicts: dict[str, str] = Field(default_factory=dict)  # trace_quality check -> verdict
    fusion_flagged_ops: dict[str, str] = Field(default_factory=dict)  # op name -> fusion candidate
    facts: WorkloadFacts = Field(default_factory=WorkloadFacts)  # workload_facts: what advice applies
    phases: TracePhases = Field(default_factory=TracePhases)  # phases mart: the serving steps

    @property
    def is_inference(self) -> bool:
        return (self.mode or "").startswith("inference")


class HostActivity(BaseModel):
    """Host work that started and ended inside a finding's idle gaps (analyzers/finding_windows.py)."""

    kind: Literal["python", "host_op"]  # a python frame, or a CPU op / annotation
    name: str
    time_ms: float  # summed over its calls inside the gaps (nested frames each count)
    calls: int


class AdviceText(BaseModel):
    """An agent's wording for one finding as data: the row of analyzers/advice/<agent>.toml keyed by
    the fact that triggers it, and the values (numbers, trace strings, flags) its templates print.
    analyzers/finding_text.py renders it; a sentence is edited in the table, not in the analyzer."""

    agent: str  # the table: analyzers/advice/<agent>.toml
    fact: str  # the row: what the analyzer found (`compute_bound`, `decode_paged`, ...)
    values: dict[str, Any] = Field(default_factory=dict)


class Finding(BaseModel):
    """One recommendation: what is slow, why, what to do, and how much it would save."""

    finding_id: str  # "<agent>:<short slug>", unique within a report
    agent: str
    tier: Tier
    category: str  # the agent's category (gemm, sdpa, cpu_idle, ...)
    title: str
    insight: str  # what the data shows, with numbers
    action: str  # what to do, one mechanism
    impact_low: float | None = None  # % of E2E recoverable (low / mid / high); None when qualitative
    impact_score: float | None = None  # mid estimate, % of E2E: the ranking key
    impact_high: float | None = None
    recoverable_ms: float | None = None  # impact_score x E2E / 100
    estimate_method: EstimateMethod
    confidence: Confidence
    evidence: dict[str, Any] = Field(default_factory=dict)  # the numbers the finding used
    evidence_sql: str  # a query over the warehouse that reproduces those numbers
    analysis_sql: str = ""  # the analyzer's own query over the marts it read (evidence_sql becomes the ledger's)
    operations: list[str] = Field(default_factory=list)  # op names / signatures covered
    details: str = ""  # longer reasoning for the Detailed Analysis section (markdown)
    # the serving phase(s) the finding applies to, from the phases of the steps that launched its
    # claimed GPU events (phase_kernels), else the trace's single phase; None without phases
    phase: str | None = None
    # The claims ledger (finding_kernels / finding_gaps): the GPU events (kernels.event_idx) and
    # GPU idle gaps (gpu_idle_gaps.gap_id) the finding's impact rests on, each with the
    # microseconds it counts. Analyzers fill the candidates; agents/claims.py gives each event
    # and gap to one finding of the report and rescales the impact to what the finding owns.
    # Kept out of the JSON dumps (thousands of rows): the warehouse holds them.
    claimed_kernels: dict[int, float] = Field(default_factory=dict, exclude=True)
    claimed_gaps: dict[int, float] = Field(default_factory=dict, exclude=True)
    claimed_time_ms: float | None = None  # sum of the owned claims / 1000 (None: the finding claims nothing)
    claimed_kernel_count: int = 0
    claimed_gap_count: int = 0
    ceded_to: dict[str, float] = Field(default_factory=dict)  # finding_id -> ms of this finding's candidates it owns
    # Where its claims lie on the trace's timeline (trace timestamps, us): from the first claimed
    # GPU event or idle gap to the end of the last, the ProfilerStep#N numbers they overlap, and the
    # host work inside its claimed idle gaps. None / empty when it claims nothing.
    ts_start_us: float | None = None
    ts_end_us: float | None = None
    steps: list[int] = Field(default_factory=list)
    host_activity: list[HostActivity] = Field(default_factory=list)
    # The what-if replay (agents/sequencing.py): the estimate from the finding's own GPU events and
    # gaps before the timeline was replayed (recoverable_ms becomes what the replay says the trace
    # saves), and the earlier finding only after which that saving is realisable (None: on its own).
    kernel_level_ms: float | None = None
    realisable_after: str | None = None
    # what the replay gives for the whole change when that is more than the estimate it is credited
    # with (recoverable_ms stays at the estimate: a heuristic share of a change the replay makes whole)
    replayed_full_ms: float | None = None


class AgentResult(BaseModel):
    agent: str
    tier: Tier
    category: str
    status: AgentStatus
    error: str | None = None
    metrics: dict[str, Any] = Field(default_factory=dict)  # the analyzer's pydantic metrics, dumped
    findings: list[Finding] = Field(default_factory=list)
    findings_markdown: str = ""  # rendered by the agent's jinja2 template (or the LLM runner)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    attempts: int = 0


class RankedFinding(Finding):
    global_rank: int  # 1..n over all findings with an impact score, contiguous


class CategoryPriority(BaseModel):
    category: str
    tier: Tier
    impact_score: float | None  # sum of the category's findings' mid estimates; None = unmodeled fallback
    quantified_score: float | None = None  # the part of impact_score from quantified findings
    finding_count: int
    source: Literal["findings", "manifest_fallback"] = "findings"


class UnaddressedOp(BaseModel):
    """A large op signature no finding claims, and why."""

    signature_key: str
    name: str
    op_category: str
    time_ms: float
    percent_of_e2e: float
    efficiency_percent: float | None
    claimed_share: float  # of its GPU time, owned by some finding
    reason: str


class ReplaySummary(BaseModel):
    """The what-if replay of a trace's timeline (analyzers/replay.py) and what it says of the findings."""

    measured_span_ms: float  # first to last GPU event, measured
    unchanged_error_us: float  # replayed span with nothing changed minus the measured span
    unchanged_worst_start_error_us: float  # the largest |replayed - measured| start of any GPU event
    kernel_level_sum_ms: float  # the findings' kernel-level estimates, summed
    replayed_sum_ms: float  # the findings' replayed savings (each as sequenced), summed
    combined_ms: float  # the replayed saving of all findings applied together
    iterations: int  # host/GPU rounds of the combined replay
    converged: bool
    # the longest step's critical path (critical_path mart), from the step's first GPU event to its
    # last one's end: its span, the GPU work and the host calls on it (ms); the rest is the time between them
    critical_path_step: int | None = None
    critical_path_ms: float | None = None
    critical_path_gpu_ms: float | None = None
    critical_path_host_ms: float | None = None


class PriorityData(BaseModel):
    trace_id: str
    comparison_scope: str
    e2e_time_ms: float
    findings: list[RankedFinding]
    priorities: list[CategoryPriority]
    # large op signatures below their attainable roofline that no finding claims, with the reason
    unaddressed_ops: list[UnaddressedOp] = Field(default_factory=list)
    # one line per compute agent whose modelled ops already run near what the GPU attains
    near_roofline: list[str] = Field(default_factory=list)
    replay: ReplaySummary | None = None  # None: the trace has no GPU event to replay
