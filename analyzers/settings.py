"""Every threshold the analyzers use, in one place, each with where its value comes from."""

from __future__ import annotations

# ---- system tier --------------------------------------------------------------------------
IDLE_PERCENT_MAX = 15.0  # TraceLens orchestrator: cpu_idle agent runs / flags above 15 % idle
SHORT_KERNEL_US = 10.0  # TraceLens short-kernel study default threshold
LAUNCH_BOUND_MEDIAN_GAP_US = 5.0  # gaps between kernels above this mean the host cannot keep up (HTA idle-time analysis)
MEMCPY_DIRECTION_PERCENT_MAX = 5.0  # TraceLens multi_kernel: D2H/H2D flagged above 5 % of E2E ...
MEMCPY_DIRECTION_COUNT_MAX = 10  # ... or above 10 transfers
EXPOSED_COMM_PERCENT_MAX = 5.0  # TraceLens multi_kernel: exposed communication above 5 % of E2E
COMM_OVERLAP_RATIO_MIN = 0.70  # TraceLens multi_kernel: comm/compute overlap below 70 % ...
COMM_OVERLAP_MIN_TOTAL_US = 100.0  # ... only when there is at least 100 us of communication
FUSION_MAX_KERNELS = 15  # TraceLens kernel_fusion: candidates of at most 15 kernels ...
FUSION_MIN_PERCENT_OF_E2E = 2.0  # ... that take at least 2 % of E2E
FUSION_OVERLAP_FACTOR = 0.85  # TraceLens kernel_fusion: fused kernel keeps 85 % of the memory traffic overlap

# ---- compute tier (TraceLens category_analyses/analysis_utils.py) ----------------------------
TARGET_LOW = 0.75  # share of the roofline gap closed: low / mid / high impact
TARGET_MID = 0.875
TARGET_HIGH = 1.0
HEURISTIC_FRACTION_LOW = 0.15  # recoverable share of an unmodeled op's % of E2E
HEURISTIC_FRACTION_MID = 0.30
HEURISTIC_FRACTION_HIGH = 0.45
MIN_OP_IMPACT_HIGH = 0.01  # per-op floor on the high estimate (% of E2E) for quantified estimates
MIN_PITEM_IMPACT_SCORE = 0.5  # a grouped finding below 0.5 % of E2E (mid) is dropped
EFFICIENCY_ANOMALY_PERCENT = 110.0  # Pct Roofline above this is a measurement anomaly, not a result
EFFICIENCY_BUCKETS = (30.0, 60.0)  # buckets 0-30 / 30-60 / 60-100 % of roofline

# ---- aggregation and validation ----------------------------------------------------------
MAX_CATEGORY_PRIORITIES = 6  # TraceLens report_utils max_recommendations
UNMODELED_CATEGORY_MIN_PERCENT = 5.0  # categories without findings but >= 5 % of compute are listed
CATEGORY_TIME_TOLERANCE = 0.10  # validation: category kernel time vs computation time within 10 %
ROLLUP_TOLERANCE = 0.02  # validation: per-category rollup equals the sum of its findings within 0.02

# ---- runner ------------------------------------------------------------------------------
AGENT_TIMEOUT_SECONDS = 120.0  # per agent, per attempt
AGENT_ATTEMPTS = 2  # one retry
