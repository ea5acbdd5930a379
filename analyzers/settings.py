"""Every threshold the analyzers use, in one place, each with where its value comes from."""

from __future__ import annotations

# ---- jobs: the ranks of one distributed run (tracelake/job_assembly.py, docs/jobs.md) -------
# A rank read from a file name when the header's distributedInfo has none, tried in order: TraceLens'
# default rank regex (generate_multi_rank_collective_report_pytorch.py, `--rank_regex`), then the
# `worker<N>` names of PyTorch's tensorboard_trace_handler runs (the param DLRM job).
RANK_FILE_NAME_PATTERNS = (r"rank[\[\-_/]?(\d+)", r"worker(\d+)")
# A host read from a file name (or the folder it sits in, below the job's folder): `node03`,
# `node-3`, `host-a`, `host12`. Ours: launchers name per-host folders or files so; a name without
# such a token says nothing of its node (TraceLens' file naming for 2 nodes x 8, TL#525/#526).
HOST_FILE_NAME_PATTERNS = (r"(?<![A-Za-z0-9])((?:node|host)(?:\d+|-[A-Za-z0-9]+))(?![A-Za-z0-9])",)
# Problems of a job named in one error line before "and N more" (each names its file).
JOB_PROBLEMS_SHOWN = 3

# ---- system tier --------------------------------------------------------------------------
IDLE_PERCENT_MAX = 15.0  # TraceLens orchestrator: cpu_idle agent runs / flags above 15 % idle
SHORT_KERNEL_US = 10.0  # TraceLens short-kernel study default threshold
LAUNCH_BOUND_MEDIAN_GAP_US = 5.0  # gaps between kernels above this mean the host cannot keep up (HTA idle-time analysis)
MEMCPY_DIRECTION_PERCENT_MAX = 5.0  # TraceLens multi_kernel: D2H/H2D flagged above 5 % of E2E ...
MEMCPY_DIRECTION_COUNT_MAX = 10  # ... or above 10 transfers
# ... or (ours) when their exposed time is at least 1 % of E2E: a single large pageable input copy
# stalls the GPU for that long, and overlap recovers 0.5-0.9 of it, above the 0.5 % finding floor.
TRANSFER_EXPOSED_PERCENT_MIN = 1.0
# Pinned-memory advice and its model when pageable copies hold more than half of a direction's copy
# time ("most of": the same strict majority as RELABEL_MIN_KERNEL_SHARE).
MOSTLY_PAGEABLE_SHARE = 0.5
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
# The share of an op's roofline (TraceLens' max-achievable peaks) it attains in practice: the
# expert rule "an op at or above its attainable share (say 70-80 % of the roofline) is fine", and
# large cuBLAS / hipBLASLt GEMMs and streaming kernels top out near 80 % of those peaks. An op's
# recoverable time is its gap to this, not to 100 %; agents with their own bands override it
# (fused attention by sequence length, convolution by kernel shape).
ATTAINABLE_ROOFLINE_PERCENT = 80.0
HEURISTIC_FRACTION_LOW = 0.15  # recoverable share of an unmodeled op's % of E2E
HEURISTIC_FRACTION_MID = 0.30
HEURISTIC_FRACTION_HIGH = 0.45
# No kernel runs faster than this: the shortest compute kernels of the shared traces take 1.5-3 us
# (launch-to-completion on an idle GPU), so an op's saving stops at its time above count x this.
KERNEL_TIME_FLOOR_US = 2.0
# A kernel is at the launch / latency floor when its mean time is at most this and its bytes and
# FLOPs would take under KERNEL_TIME_FLOOR_US even at its attainable share of the roofline: its time
# is fixed cost (launch, ramp-up of one partial wave, tail), which no tuning removes. 10 us: the
# TraceLens short-kernel study threshold (SHORT_KERNEL_US). Such an op is credited only with what
# fusing it into a neighbour removes: one kernel's fixed cost, KERNEL_TIME_FLOOR_US, per kernel.
LATENCY_BOUND_KERNEL_US = 10.0
MIN_OP_IMPACT_HIGH = 0.01  # per-op floor on the high estimate (% of E2E) for quantified estimates
MIN_PITEM_IMPACT_SCORE = 0.5  # a grouped finding below 0.5 % of E2E (mid) is dropped
EFFICIENCY_ANOMALY_PERCENT = 110.0  # Pct Roofline above this is a measurement anomaly, not a result
EFFICIENCY_BUCKETS = (30.0, 60.0)  # buckets 0-30 / 30-60 / 60-100 % of roofline

# ---- aggregation and validation ----------------------------------------------------------
# The claims ledger (agents/claims.py): where findings rest on the same GPU events or idle gaps,
# the best-modelled finding owns them (quantified before heuristic before qualitative), then the
# most specific one, in this agent order: a named replacement for one op family (eager attention
# -> SDPA, a GEMM / conv / norm / MoE / Triton kernel) before a transfer or collective finding,
# before a multi-op fusion chain, before the bandwidth-bound catch-alls. TraceLens has no such
# rule (its agents' estimates overlap); the order is ours and documented in docs/findings.md.
CLAIM_METHOD_ORDER = ("quantified", "heuristic", "qualitative")
CLAIM_AGENT_ORDER = ("sdpa", "gemm", "convolution", "norm", "moe", "triton", "multi_kernel", "kernel_fusion",
                     "cpu_idle", "reduce", "elementwise", "generic")
# Nothing big left unsaid (analyzers/coverage.py): an op signature of at least 5 % of E2E (the
# issue's "say 5 %") below its attainable roofline share needs a finding that owns at least half
# of its GPU time, or the report lists it with the reason it has none.
BIG_OP_PERCENT_OF_E2E = 5.0
BIG_OP_MIN_CLAIMED_SHARE = 0.5
MAX_CATEGORY_PRIORITIES = 6  # TraceLens report_utils max_recommendations
UNMODELED_CATEGORY_MIN_PERCENT = 5.0  # categories without findings but >= 5 % of compute are listed
CATEGORY_TIME_TOLERANCE = 0.10  # validation: category kernel time vs computation time within 10 %
ROOFLINE_VALIDATION_MAX_PERCENT = 100.0  # validation: an op above 100 % of its roofline is physically impossible (listed)

# ---- runner ------------------------------------------------------------------------------
AGENT_TIMEOUT_SECONDS = 120.0  # per agent, per attempt
PLOT_TIMEOUT_SECONDS = 60.0  # the plot child; past it the plot is drawn in the analysis process
# The plot child warms up while the ingest decodes on every core, so it takes idle CPU time only:
# 55 MB analyze 2.97 -> 2.84 s on 2 cores (bench/analyze.py).
PLOT_CHILD_NICENESS = 10
AGENT_ATTEMPTS = 2  # one retry

# ---- cpu_idle agent --------------------------------------------------------
# Gap two back-to-back kernels keep even with a full launch queue; the GPU-bound H100 Qwen test
# trace has a median gap of 1.4 us, so 2 us is taken as not recoverable per gap.
RESIDUAL_GAP_US = 2.0
# Each gap's class (launch_bound, host_work, sync_blocked, queued_waiting, window_edge) is set in
# the gpu_idle_gaps mart from dbt vars (idle_gap_long_us, idle_gap_launch_latency_us,
# idle_gap_sync_span_tolerance_us, synchronizing_runtime_calls in dbt_project.yml).
# Share of the launch / host-sync gaps a GPU graph or sync removal recovers (low / mid / high):
# graphs remove the host from the kernel-to-kernel path, but capture rarely covers a whole step.
IDLE_RECOVERY_FRACTIONS = (0.25, 0.50, 0.75)
# Host work between GPU phases (data loading, Python work between steps) is only partly movable off
# the critical path, so only a smaller share is credited.
BUBBLE_RECOVERY_FRACTIONS = (0.10, 0.25, 0.50)
# Queued-waiting idle (work queued ahead, GPU waiting on a dependency) is reported, qualitatively,
# from this share of E2E: the P-item floor TraceLens uses (MIN_PITEM_IMPACT_SCORE).
QUEUED_WAITING_PERCENT_MIN = 0.5
# Share of all kernels below SHORT_KERNEL_US from which a launch-limited trace is "many short kernels".
SHORT_KERNEL_SHARE_MIN = 0.5
# Share of idle time sitting in window-edge gaps from which the profile window itself is reported.
WINDOW_EDGE_IDLE_SHARE_MIN = 0.5

# ---- multi_kernel agent ----------------------------------------------------
# Share of the hideable exposed time (communication, or exposed host<->device copies) that
# overlapping recovers, low / mid / high: overlap is never perfect (bucket boundaries, the last
# collective of a step, stream dependencies), so even the high end leaves 10 %.
OVERLAP_RECOVERY_FRACTIONS = (0.5, 0.7, 0.9)
# Collectives shorter than this on average (and more than MEMCPY_DIRECTION_COUNT_MAX of them) are
# latency-bound: fusing them into fewer, larger ones is the mechanism (NCCL / RCCL latency is
# several us per call, so 100 us messages are still dominated by per-call cost at small sizes).
SMALL_COLLECTIVE_US = 100.0
# The slowest link of a GPU server: PCIe Gen4 x16 (32 GB/s, ~25 GB/s achieved). NVLink, xGMI /
# Infinity Fabric and PCIe Gen5 are faster, so time above bytes / this is not the link's limit:
# collectives (bytes x nccl-tests' bus factor) and pinned host<->device copies are measured
# against it, and the savings that follow are conservative.
LINK_FLOOR_GBPS = 25.0
# Collectives whose time grows by less than half their bytes' growth (between the smallest and the
# largest message size, at least 2x apart) spend their time waiting for the other ranks.
# (Linear scaling would be 1.0; half of it leaves room for the per-call latency a bandwidth-bound
# collective also pays. 2x apart keeps two message sizes of one bucket schedule distinct.)
COLLECTIVE_WAIT_SCALING_MAX = 0.5
COLLECTIVE_SIZE_RATIO_MIN = 2.0
# The collective model is used when the collectives with recorded bytes hold at least this share of
# the exposed time it is applied to (the same bar as a "high" confidence fusion projection).
COLLECTIVE_MODELED_SHARE_MIN = 0.75
TOP_COLLECTIVES = 10

# ---- kernel_fusion agent ---------------------------------------------------
# At most this many elementwise ops after a GEMM are an epilogue (TraceLens kernel-fusion spec:
# "GEMM + 1-2 elementwise kernels").
EPILOGUE_MAX_OPS = 2
# Eager attention: at most this many ops between the first batched matmul and the softmax (scale,
# mask, dtype cast) and between the softmax and the second batched matmul (dropout, cast).
ATTENTION_MAX_OPS_BEFORE_SOFTMAX = 4
ATTENTION_MAX_OPS_AFTER_SOFTMAX = 3
# Share of a chain's kernel time that must have a perf model (bytes) for a "high" confidence
# roofline projection (TraceLens kernel_fusion uses 0.75 for chains of 5+ kernels).
FUSION_MODELED_SHARE_HIGH = 0.75
# An op name is handed to the compute tier as fusion-covered only when high-confidence candidates
# hold at least this share of that op name's kernel time (otherwise other instances still deserve
# kernel tuning findings).
FUSION_FLAG_OP_TIME_SHARE_MIN = 0.5
# Patterns whose candidates take their ops from the compute tier at any confidence: unfused
# attention has one method on every vendor (the fused kernel's FLOP model, issue 26), so a
# confidence lowered by a trace-quality warning must not hand it to the per-op roofline gap.
FUSION_ANY_CONFIDENCE_PATTERNS = frozenset({"eager_attention"})
# At most this many fusion findings per trace (the rest stay in the candidate list).
MAX_FUSION_FINDINGS = 8
# Kernel types a fused attention kernel makes unnecessary beside it in the same module: FlashAttention
# and PyTorch SDPA read Q, K and V strided, so the layout copies that make them contiguous go with the
# eager attention they feed (a chain of only these is no separate fusion candidate there)
FUSED_ATTENTION_REMOVES_KERNEL_TYPES = ("copy",)
# A chain whose intermediates are under 5 % of its bytes (e.g. a scalar counter update next to a
# norm) gains nothing from fusion that kernel tuning would not give: rejected.
FUSION_MIN_BYTES_SAVED_SHARE = 0.05

# ---- compute agent ---------------------------------------------------------
RELABEL_MIN_KERNEL_SHARE = 0.5  # "for most of their kernel time": strictly more than half (brief)

# ---- gemm agent ------------------------------------------------------------
GEMM_ALIGNMENT = 64  # brief: check M, N, K for multiples of 64 (128 preferred) on matrix cores
TILE_TUNING_MIN_FLOPS_PER_BYTE = 200.0  # TraceLens gemm spec: FLOPS/Byte > 200 and compute-bound -> tile tuning
EPILOGUE_FUSION_MAX_FLOPS_PER_BYTE = 100.0  # TraceLens gemm spec: FLOPS/Byte < 100 and memory-bound -> epilogue fusion
# FP8 raises the matrix peak, which only a GEMM that runs long enough to be set by that peak
# gains from: below ~50 us a kernel's prologue / epilogue and launch are a large share of its time.
FP8_MIN_KERNEL_US = 50.0
# A GEMM call shorter than this is a few waves of thread blocks at most: its time is launch and
# tail effects (BERT-small's 141-token GEMMs run 4-8 us), not the kernel's efficiency.
SMALL_GEMM_CALL_US = 10.0
# A group within this many points of its attainable share is "close to" it (TARGET_LOW of the gap
# closed leaves a quarter: at 80 % attainable, 60 % and up is within reach of tuning only).
NEAR_ATTAINABLE_MARGIN_PERCENT = 20.0
TINY_GEMM_DIM_MAX = 16  # TraceLens gemm spec: min(M, N, K) <= 16 ...
TINY_GEMM_MIN_CALLS = 1000  # ... with >= 1000 calls -> batch into batched / grouped GEMM
# A memory-bound GEMM of a decode step with M (the step's token batch) at most this reads its
# weights for a few rows: weight bytes set its time, so weight-only quantization (FP8 / INT4
# weights: 2x / 4x fewer bytes than BF16) is the lever. 64: below it a BF16 GEMM on H100 / MI300X
# stays under the ridge point (~300 FLOP/byte) by far (FLOP/byte ~ M), vLLM / SGLang decode batches.
DECODE_GEMM_MAX_M = 64

# ---- sdpa agent ------------------------------------------------------------
# TraceLens sdpa spec: expected % of roofline for fused attention by sequence length N (anchor N -> band)
EXPECTED_EFFICIENCY_BY_SEQ_LEN = ((512, 5.0, 15.0), (1024, 20.0, 40.0), (2048, 40.0, 60.0), (4096, 50.0, 70.0))
# At most this many query tokens per sequence is a decode step (one new token, or a few with
# speculative decoding): only then is decode-attention advice written.
DECODE_MAX_QUERY_LEN = 8
# What fused attention reaches by head dim, % of the dense BF16 peak: FlashAttention-3 paper (Shah
# et al. 2024, H100 SXM5 BF16 forward, seqlen 16k): FlashAttention-2 (low) and FlashAttention-3
# (high) TFLOPS / 989 TFLOPS. Long sequences are capped by it (the sequence-length band above is
# the TraceLens sdpa spec's); (head dim, low %, high %), nearest head dim. H100 figures serve as the
# reference on every GPU: no per-platform fused-attention measurements are seeded.
EXPECTED_EFFICIENCY_BY_HEAD_DIM = ((64, 33.0, 50.0), (128, 37.0, 66.0), (256, 34.0, 76.0))
# Up to this sequence length fused attention is "short" (the sdpa spec's bands reach 40 % of
# roofline only from N = 1024): advice about packing longer sequences applies only here.
SHORT_ATTENTION_SEQ_LEN = 1024
KV_CACHE_WRITE_PERCENT_MAX = 10.0  # TraceLens sdpa spec: reshape_and_cache above ~10 % of paged time -> tune block_size

# ---- elementwise agent -----------------------------------------------------
BASELINE_EFFICIENCY_MIN_PERCENT = 50.0  # TraceLens elementwise spec: simple ops below 50 % of HBM peak are "low"
HIGH_INVOCATION_CALLS = 1000  # TraceLens elementwise spec: more than 1000 calls -> launch overhead / batching

# ---- norm agent ------------------------------------------------------------
NORM_KERNEL_SUBOPTIMAL_PERCENT = 20.0  # TraceLens norm spec: norm below 20 % of HBM peak -> kernel suboptimal
BATCHNORM_CHANNELS_LAST_MIN_PERCENT = 10.0  # TraceLens norm spec: BatchNorm >= 10 % of computation -> channels-last

# ---- convolution agent -----------------------------------------------------
# TraceLens convolution spec: > 20 % transpose overhead -> strongly recommend channels-last
TRANSPOSE_OVERHEAD_HIGH_PERCENT = 20.0
TRANSPOSE_OVERHEAD_MODERATE_PERCENT = 10.0  # ... 10-20 % moderate, < 10 % acceptable
# TraceLens convolution spec: expected % of peak by kernel shape (prose bands)
EXPECTED_EFFICIENCY_PERCENT = {"kxk": 70.0, "3x3": 70.0, "1x1": 60.0, "depthwise": 50.0}

# ---- triton agent ----------------------------------------------------------
DEDICATED_LIBRARY_MAX_EFFICIENCY = 30.0  # TraceLens triton spec: fused norm/reduction below 30 % -> consider a library kernel

# ---- generic agent ---------------------------------------------------------
MISCATEGORIZED_MIN_SHARE = 0.5  # most of the op's kernel time in one recognised category

# ---- tracelake compare (regression verdict, analyzers/regression.py) --------------------------
# Default regression gate, % slower than the baseline: five times the 1.1 % step-to-step spread of
# GPU kernel time in the 3-step resnet test trace, so a quiet rerun does not fail CI.
COMPARE_THRESHOLD_PERCENT = 5.0
# A category or op signature under 1 % of the baseline's GPU busy time (on both sides) cannot fail
# the run by itself: even doubled it moves busy time by under 1 %, well inside the threshold, and
# short items are the noisiest. It is still listed.
COMPARE_MIN_ITEM_SHARE_PERCENT = 1.0
# Noise band = this many standard errors of the difference of the two sides' mean kernel time:
# with 3 vs 3 profiler steps (Welch df ~4) the two-sided 95 % Student t quantile is 2.78, so 3
# standard errors keeps false alarms under 5 % from 3 vs 3 samples up (2 vs 2: about 10 %).
COMPARE_NOISE_STANDARD_ERRORS = 3.0
# Samples per side (profiler steps or traces) from which the spread is trusted for a "high"
# confidence verdict; 2 samples give a spread, but one with a single degree of freedom.
COMPARE_MIN_SAMPLES_HIGH_CONFIDENCE = 3
# Rows of the op-signature table in the markdown verdict (every row is in --format json).
COMPARE_TOP_OPS = 20
# A pair of sides is compared only when, on each side, at least half of the op kernel time runs op
# signatures the other side runs too: below that, most of a side's GPU time is work the other side
# never does, and the difference measures two workloads, not a change (issue 28: BERT + Qwen +
# TimeSformer against ResNet + Qwen + BERT pooled shared 50 of 194 signatures and was called a
# 284.8 % regression). The same model on H100 and MI300X shares 100 % (tests/data BERT, Qwen).
COMPARE_MIN_SIGNATURE_OVERLAP_PERCENT = 50.0
# Comparative report: a matched op whose two times differ by less than 0.5 % is "same" speed in the
# "Slower side" column (the times print with 3 decimals of ms; a 0.5 % difference is below what one
# profiler run resolves: the 3-step resnet test trace's step-to-step spread is 1.1 %).
SAME_SPEED_RATIO = 1.005

# ---- what a trace that is not the workload can tell (issue 13) -------------------------------
# trace_quality checks whose warn verdict means the trace does not show the workload: a tiny GPU
# share (micro-benchmark / harness) or a GPU-graph capture. On such a trace every finding is low
# confidence; the findings of the tiers listed for the check carry no recoverable-time estimate
# (agents/trace_scope.py): a harness's idle time, launches and copies are not the workload's, and
# a capture's kernels are warm-up (expert_expectations.md: "Know when there is nothing to say");
# a harness's kernels are stated by their efficiency, but its window is no E2E to claim time of (issue 26).
NOT_THE_WORKLOAD_CHECKS: dict[str, tuple[str, ...]] = {
    "gpu_busy_share": ("system", "compute"),
    "graph_capture": ("system", "compute"),
}

# ---- finding windows (analyzers/finding_windows.py) ----
# Python frames and host ops listed per finding as the host work inside its idle gaps: the few
# largest say what the host did (a data loader, a copy) without a wall of frames.
FINDING_HOST_ACTIVITY_TOP = 5

# ---- job findings (issue 24: analyzers/job_*.py) ------------------------------------------------
# A rank is the job's straggler when it arrives last at a collective more often than every other
# rank and at at least this share of the job's implicit-sync collectives: a majority, the design's
# "last in >= X %" (shared/reference/multi_rank.md); uniformly random arrival of 8 ranks would give
# 12.5 %. TraceLens' straggler summary (TL#599) sorts by wait and leaves the verdict to the reader.
STRAGGLER_LAST_ARRIVAL_PERCENT_MIN = 50.0
# ... over at least this many collectives: fewer is a coincidence, not a pattern (a rank last at 2
# of 2 collectives is 100 %).
STRAGGLER_MIN_COLLECTIVES = 4
# Why a rank is late: the ops whose GPU work before the collectives it arrives last at exceeds the
# median rank's most, this many listed (the vllm#52911 hand-built tables show the top 1-3).
WHY_LATE_TOP_OPS = 3
# ... an op is named as the difference only when its excess over the median rank is at least this
# share of the others' mean wait for the straggler: an op that explains a tenth of the lateness is
# not why the rank is late.
WHY_LATE_MIN_SHARE = 0.10
# The straggler's late start is placed before its profiled step when it enters that step at least this
# share of its late start after the median rank (a strict majority of the lateness is already there
# when the step begins, so no op inside the traced window can explain it; as MOSTLY_PAGEABLE_SHARE).
WHY_LATE_BEFORE_STEP_SHARE = 0.5
# A bandwidth-bound collective signature recovers its median latency above what its bytes take at
# this share of the link's peak bus bandwidth (interconnect_peaks seed): the same attainable share
# as ATTAINABLE_ROOFLINE_PERCENT (nccl-tests' large-message bus bandwidth tops out below peak).
COLLECTIVE_ATTAINABLE_PEAK_PERCENT = 80.0
# An all-to-all(v) is imbalanced when its busiest rank sends this much more than the mean
# (max / mean of the per-rank bytes, TraceLens' size_imbalance): 1.2 = 20 % above the mean; the
# collective runs as long as its busiest rank, so (1 - mean / max) of it is the imbalance's.
ALLTOALL_IMBALANCE_MAX = 1.2
# Ranks of one node share one clock, and implicit-sync collectives end together on them: the shared
# DLRM job ends within 1-7 us. A median end skew above this on one node is a clock or NCCL / RCCL
# anomaly (TraceLens issue #22), not a straggler: its waits cannot be trusted.
CLOCK_END_SKEW_MAX_US = 50.0
# A rank's collective time is "mostly waiting" when its wait (collective_calls.wait_us: the time
# until the last rank arrived) is at least this share of its collective kernels' time: then overlap
# cannot hide it, the late rank must arrive earlier (the per-rank multi-kernel finding says so).
COLLECTIVE_WAIT_SHARE_MIN = 0.5

# ---- multi-rank jobs (models/marts/job_clock_offsets.sql) ----------------------------------
# A node's clock offset is applied only above this many µs. The models read the dbt var
# `clock_offset_floor_us` (dbt_project.yml), which must equal this (tests/jobs check it): ranks on
# one node share a clock, and implicit-sync collectives end within 1-7 µs of each other on the
# shared 8-rank DLRM job (TraceLens' skew in end time), so an estimate below ~3x that is noise.
CLOCK_OFFSET_FLOOR_US = 20.0

# ---- collective signatures (models/marts/collective_signatures.sql, dbt vars of the same names) ----
# vllm-project/vllm#52777's classes for a collective signature: skew-bound, bandwidth-bound, mixed,
# inconclusive. The mart reads these values from dbt_project.yml's vars (lower-case names); a test
# checks that the two agree.
# Skew-bound when waiting for the last rank is more than this share of a rank's time in the
# collective (median over the signature's instances of avg_wait / (avg_wait + comm_latency)):
# waiting dominates, a strict majority (as MOSTLY_PAGEABLE_SHARE).
COLLECTIVE_SKEW_WAIT_SHARE_MIN = 0.5
# Bandwidth-bound when the median bus bandwidth reaches this share of the link's peak
# (seeds/interconnect_peaks.csv): TraceLens' 8x MI300X reference (shared/reference/multi_rank.md)
# moves 1.6-3.2 GB messages, transfers the link limits, at 230-239 GiB/s bus bandwidth = 0.55-0.57
# of the 448 GB/s XGMI peak; small, latency-bound messages stay far below half of it.
COLLECTIVE_BANDWIDTH_PEAK_SHARE_MIN = 0.5
# Fewer instances than this make a signature inconclusive: a median of one or two is one sample
# (TraceLens' summary reports them all the same).
COLLECTIVE_SIGNATURE_MIN_INSTANCES = 3
# ...unless waiting is this share of the ranks' time in them or more: then the transfer is a tenth of
# the time or less on the median instance, and one instance already measures every rank's wait (the
# shared DLRM job: 10 us all-to-all transfers behind 125-7,624 us start skews, shares 0.94-0.99).
COLLECTIVE_DECISIVE_WAIT_SHARE = 0.9

# ---- the what-if replay (analyzers/replay.py, agents/sequencing.py) ----
# The host and GPU chains are solved in turn until no synchronizing call's wait moves by more than
# this (µs; Kineto's timestamps are µs with a ns fraction: a thousandth is below their resolution)...
REPLAY_SETTLED_US = 0.001
# ...or for this many rounds: each round settles at least one more host/GPU alternation of the
# longest chain of waits; the shared traces settle in at most a few rounds per synchronizing call
# that waited (the resnet step: 9). A replay that does not settle says so in its result.
REPLAY_MAX_ITERATIONS = 200
# A finding whose replayed saving alone is below this share of its kernel-level estimate is tried
# after each finding ranked above it: the timeline, not the kernels, holds its saving back (on a
# launch-bound step a faster kernel only makes the GPU wait longer for the next launch). Half: the
# saving is mostly gated, not mostly realised.
REPLAY_GATED_SHARE = 0.5
# ...and it is "realisable after" the earlier finding that releases the most of it, when that
# finding releases at least this share of its kernel-level estimate beyond its solo saving.
REPLAY_RELEASED_SHARE = 0.25
# At most this many earlier findings are tried as the one that releases a gated saving (the ones
# with the largest replayed savings): each try is one replay of the trace.
REPLAY_MAX_ENABLER_TRIES = 5
# Findings of these agents fuse kernels: the time a claimed GPU event loses takes the same share of
# its launch call and of the host work before it (a fused chain launches once, not once per op).
REPLAY_FUSING_AGENTS = ("kernel_fusion",)
# Findings whose fix runs the step as a GPU graph (or compiled): every GPU event launched in the
# finding's window loses its launch call and the host work before it on the replayed timeline, so the
# kernel findings a launch-bound step holds back are released after it.
REPLAY_LAUNCH_FREE_FINDINGS = ("cpu_idle:launch-bound", "cpu_idle:host-overhead")
# The card says the rest of a kernel-level estimate is held back by the timeline when the replayed
# saving is below this share of it (below, the difference is the replay's own rounding of lags).
REPLAY_HELD_BACK_SHARE = 0.9
# Ours: the report calls a step's length set by the GPU when GPU work is at least this share of its
# critical path (a strict majority of the path is kernels), else set by the host.
CRITICAL_PATH_GPU_BOUND_SHARE = 0.5

# ---- model identification (analyzers/model_*.py) ----------------------------------------------
# Ours: an outermost module call that holds this share of the trace's GPU kernel time is one of the
# trace's models even with no layer frames of its own (a torch.compile'd transformer runs its blocks inlined in
# one graph, so only its own frame is left); "most of the time" is a strict majority.
MODEL_ROOT_GPU_TIME_SHARE_MIN = 0.5
# Ours: a convolution with a single weight shape beside attention is a patch embedding (ViT, DiT, SigLIP), not
# a CNN stem: at most this many distinct convolution weight shapes leave a transformer a transformer.
PATCH_EMBEDDING_CONV_SHAPES_MAX = 1
