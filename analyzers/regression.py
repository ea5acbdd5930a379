"""Regression verdict for `tracelake compare`: a baseline and a candidate set of traces in, a
verdict with every compared metric out.

Metrics (per side, the mean over the side's traces; each from a per-trace mart):
- headline (`trace_gpu_metrics`): `gpu_timeline` total, busy, computation, exposed comm / memcpy
  and idle time, plus the GPU kernel time (sum of the linked GPU events' durations, `kernels`);
- categories (`trace_category_kernel_time`): every GPU kernel's duration once, under the op
  category of the op that launched it (TraceLens op categories, as in analysis.md), `collectives`
  (every `kernels.is_comm` kernel, linked or not) or, launched by no op, its kernel category (or
  `unlinked`); together they are all GPU kernel time, while the headline kernel time stays
  linked-only like its noise samples;
- op signatures (`trace_op_signature_time`): `op_perf` on one platform per trace (kernel time
  does not depend on it), keyed by name + input dims + input types + strides + concrete inputs,
  summed over threads.

Noise: the spread of GPU kernel time between repeated samples of a side: its profiler steps
(`profiler_steps.kernel_time_ms`, pooled over the side's traces when every trace has steps),
else its traces' kernel time. The noise band is k standard errors of the relative difference of
the two means, sqrt(cv_b^2/n_b + cv_c^2/n_c); a side with one sample borrows the other side's
spread. With one sample on both sides the noise is unknown and the threshold decides alone.

Gating: a metric fails the run when the candidate is slower by more than the threshold and by
more than the noise band. Total, busy and kernel time always gate; a category or op signature
gates only when it holds at least the minimum share of the baseline's busy time on one side.
New or gone categories and ops are listed and never fail the run by themselves (their time is in
the headline metrics). The op signatures come from the op diff (analyzers/trace_diff.py, also
`tracelake.diff`); when the two sides share too little of their op kernel time
(settings.COMPARE_MIN_SIGNATURE_OVERLAP_PERCENT) they ran different work: the verdict is
`not_comparable` and nothing fails.
"""

from __future__ import annotations

import math
from typing import Literal

import duckdb
import polars as pl
from pydantic import BaseModel, Field

from tracelake.analyzers import settings
from tracelake.analyzers.common import query_rows
from tracelake.analyzers.contracts import Confidence
from tracelake.analyzers.trace_diff import OpKernelDiff, diff_traces
from tracelake.core.errors import TraceLakeError

MetricKind = Literal["headline", "category", "op"]
ChangeStatus = Literal["slower", "faster", "within_noise", "unchanged", "new", "gone"]
VerdictKind = Literal["regression", "improvement", "no_change", "not_comparable"]
SampleSource = Literal["profiler_steps", "traces"]

CATEGORY_SOURCE = "trace_category_kernel_time: op categories, collectives (kernels.is_comm), unlinked kernels by kernel category"
COLLECTIVES = "collectives"
SUMMARY_LABEL_CHARS = 80  # an op signature named in the verdict line is cut here

# (column in the headline query, label, gates the exit code)
HEADLINE_METRICS: tuple[tuple[str, str, bool], ...] = (
    ("total_time_ms", "total GPU time", True),
    ("busy_time_ms", "GPU busy time", True),
    ("kernel_time_ms", "GPU kernel time", True),
    ("computation_time_ms", "computation time", False),
    ("exposed_comm_time_ms", "exposed communication time", False),
    ("exposed_memcpy_time_ms", "exposed memcpy time", False),
    ("idle_time_ms", "idle time", False),
)

# what a trace on each side weighs (models/marts/trace_gpu_metrics.sql) and its profiler steps
TRACES_SQL = "select * from trace_gpu_metrics where trace_id in (select unnest($1)) order by trace_id"
STEPS_SQL = ("select trace_id, step_number, kernel_time_ms from profiler_steps "
             "where trace_id in (select unnest($1)) order by trace_id, step_number")

# the mean per trace of each side of a per-trace mart, by `keys`: {keys}, {aggregates}, {mart}
SIDE_MEANS_SQL = """
with sides as (
    select unnest($1) as trace_id, 'baseline' as side, len($1) as trace_count
    union all
    select unnest($2) as trace_id, 'candidate' as side, len($2) as trace_count
)
select sides.side, {keys}, {aggregates}
from sides inner join {mart} as facts on facts.trace_id = sides.trace_id
group by all
"""
CATEGORY_KEYS = ("category",)


class ComparisonError(TraceLakeError):
    """The traces cannot be compared (e.g. one side has no GPU work)."""


class CompareSettings(BaseModel):
    """The thresholds a comparison used (defaults: analyzers/settings.py)."""

    threshold_percent: float = Field(default=settings.COMPARE_THRESHOLD_PERCENT, ge=0)
    min_item_share_percent: float = Field(default=settings.COMPARE_MIN_ITEM_SHARE_PERCENT, ge=0)
    noise_standard_errors: float = Field(default=settings.COMPARE_NOISE_STANDARD_ERRORS, ge=0)
    min_samples_high_confidence: int = Field(default=settings.COMPARE_MIN_SAMPLES_HIGH_CONFIDENCE, ge=2)
    min_signature_overlap_percent: float = Field(default=settings.COMPARE_MIN_SIGNATURE_OVERLAP_PERCENT, ge=0, le=100)


class SideSamples(BaseModel):
    """One side's traces and its noise samples (GPU kernel time per profiler step or per trace)."""

    trace_ids: list[str]
    file_names: list[str]
    devices: list[str] = []  # the GPUs its traces ran on (traces.device_name), each once
    sample_source: SampleSource  # profiler_steps when every trace has steps, else traces
    sample_count: int
    kernel_time_samples_ms: list[float]
    kernel_time_mean_ms: float
    kernel_time_std_ms: float | None  # sample standard deviation; None with one sample

    @property
    def cv(self) -> float | None:
        """Coefficient of variation (std / mean); None when it cannot be measured."""
        if self.kernel_time_std_ms is None or self.kernel_time_mean_ms <= 0:
            return None
        return self.kernel_time_std_ms / self.kernel_time_mean_ms

    @property
    def sample_text(self) -> str:
        unit = "step" if self.sample_source == "profiler_steps" else "trace"
        return f"{self.sample_count} {unit}{'' if self.sample_count == 1 else 's'}"


class NoiseEstimate(BaseModel):
    estimated: bool
    method: str
    baseline_cv_percent: float | None  # step-to-step (or trace-to-trace) spread, % of the mean
    candidate_cv_percent: float | None
    borrowed_spread: bool  # one side had a single sample and took the other side's spread
    standard_error_percent: float | None  # of the relative difference of the two means
    band_percent: float | None  # ± noise_standard_errors x standard_error_percent
    welch_df: float | None  # Welch-Satterthwaite degrees of freedom (both sides >= 2 samples)
    note: str


class MetricChange(BaseModel):
    kind: MetricKind
    name: str  # gpu_timeline column, op category, or op name
    label: str  # what the markdown calls it
    baseline_ms: float | None  # None: absent on that side
    candidate_ms: float | None
    delta_ms: float
    change_percent: float | None  # (candidate - baseline) / baseline; None when one side is absent
    baseline_share_percent: float | None  # baseline_ms as % of the baseline's GPU busy time
    status: ChangeStatus
    gating: bool  # may fail the run (headline gate, or an item above the share floor)
    fails: bool  # gating and slower beyond the threshold and the noise


class OpSignatureChange(MetricChange):
    op_category: str
    input_dims: str
    input_type: str
    input_strides: str
    concrete_inputs: str
    baseline_calls: float | None  # mean instances per trace
    candidate_calls: float | None


class RegressionVerdict(BaseModel):
    """`tracelake compare --format json`."""

    verdict: VerdictKind
    regression: bool  # the CLI exits 1 when true
    # the smaller of the two sides' shares of op kernel time in op signatures both sides run
    signature_overlap_percent: float
    summary: str  # the verdict line
    confidence: Confidence
    deciding_metric: str  # label of the metric the summary and confidence rest on
    settings: CompareSettings
    baseline: SideSamples
    candidate: SideSamples
    noise: NoiseEstimate
    category_source: str = CATEGORY_SOURCE
    headline: list[MetricChange]
    categories: list[MetricChange]
    ops: list[OpSignatureChange]  # by absolute change, largest first
    failures: list[str]  # labels of the failing metrics
    device_warning: str | None = None  # the sides ran on different GPUs: a change may be the hardware
    # the lakehouse snapshot judged (`tracelake sql --at N` reads it again); None on the classic layout
    warehouse_snapshot: int | None = None


def device_warning(baseline: SideSamples, candidate: SideSamples) -> str | None:
    if set(baseline.devices) == set(candidate.devices):
        return None
    return (f"the baseline ran on {', '.join(baseline.devices)} and the candidate on {', '.join(candidate.devices)}: "
            "a change may be the hardware, not the code")


# ---- samples and noise ------------------------------------------------------------------------

def _mean_std(values: list[float]) -> tuple[float, float | None]:
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _side_samples(trace_rows: list[dict], step_rows: list[dict]) -> SideSamples:
    trace_ids = [r["trace_id"] for r in trace_rows]
    traces_with_steps = {r["trace_id"] for r in step_rows}
    if step_rows and traces_with_steps == set(trace_ids):
        source: SampleSource = "profiler_steps"
        values = [float(r["kernel_time_ms"]) for r in step_rows]
    else:
        source = "traces"
        values = [float(r["kernel_time_ms"]) for r in trace_rows]
    mean, std = _mean_std(values)
    return SideSamples(
        trace_ids=trace_ids, file_names=[r["file_name"] for r in trace_rows],
        devices=list(dict.fromkeys(r["device_name"] for r in trace_rows)), sample_source=source,
        sample_count=len(values), kernel_time_samples_ms=values, kernel_time_mean_ms=mean,
        kernel_time_std_ms=std,
    )


def estimate_noise(baseline: SideSamples, candidate: SideSamples, config: CompareSettings) -> NoiseEstimate:
    method = (f"±{config.noise_standard_errors:g} standard errors of the relative difference of mean GPU "
              "kernel time per sample, sqrt(cv_b²/n_b + cv_c²/n_c)")
    cv_b, cv_c = baseline.cv, candidate.cv
    if cv_b is None and cv_c is None:
        return NoiseEstimate(
            estimated=False, method=method, baseline_cv_percent=None, candidate_cv_percent=None,
            borrowed_spread=False, standard_error_percent=None, band_percent=None, welch_df=None,
            note=(f"noise not estimated ({baseline.sample_text} vs {candidate.sample_text}): "
                  "the verdict rests on the threshold alone"),
        )
    borrowed = cv_b is None or cv_c is None
    spread_b = cv_b if cv_b is not None else (cv_c or 0.0)  # one of the two is measured
    spread_c = cv_c if cv_c is not None else (cv_b or 0.0)
    var_b = spread_b**2 / baseline.sample_count
    var_c = spread_c**2 / candidate.sample_count
    standard_error = math.sqrt(var_b + var_c) * 100
    welch_df = None
    if not borrowed and var_b + var_c > 0:
        welch_df = (var_b + var_c) ** 2 / (var_b**2 / (baseline.sample_count - 1) + var_c**2 / (candidate.sample_count - 1))
    note = f"spread of GPU kernel time over {baseline.sample_text} vs {candidate.sample_text}"
    if borrowed:
        single = "baseline" if cv_b is None else "candidate"
        note += f"; the {single} has one sample and is assumed to vary like the other side"
    return NoiseEstimate(
        estimated=True, method=method,
        baseline_cv_percent=None if cv_b is None else cv_b * 100,
        candidate_cv_percent=None if cv_c is None else cv_c * 100,
        borrowed_spread=borrowed, standard_error_percent=standard_error,
        band_percent=config.noise_standard_errors * standard_error, welch_df=welch_df, note=note,
    )


# ---- classification ---------------------------------------------------------------------------

def metric_change(
    kind: MetricKind, name: str, label: str, baseline_ms: float | None, candidate_ms: float | None,
    *, busy_ms: float, gate: bool, noise: NoiseEstimate, config: CompareSettings,
) -> MetricChange:
    """Status of one metric; `gate` says whether its kind may fail the run at all."""
    delta = (candidate_ms or 0.0) - (baseline_ms or 0.0)
    share = None if baseline_ms is None or busy_ms <= 0 else baseline_ms / busy_ms * 100
    if kind != "headline":  # the tiny-item floor, on the larger of the two sides
        largest = max(baseline_ms or 0.0, candidate_ms or 0.0)
        gate = gate and busy_ms > 0 and largest / busy_ms * 100 >= config.min_item_share_percent
    change = None
    status: ChangeStatus
    if not baseline_ms and not candidate_ms:  # zero on both sides (e.g. no communication at all)
        change, status = 0.0, "unchanged"
    elif not baseline_ms:
        status = "new"
    elif not candidate_ms:
        status = "gone"
    else:
        change = delta / baseline_ms * 100
        if abs(change) <= config.threshold_percent:
            status = "unchanged"
        elif noise.band_percent is not None and abs(change) <= noise.band_percent:
            status = "within_noise"
        else:
            status = "slower" if change > 0 else "faster"
    return MetricChange(
        kind=kind, name=name, label=label, baseline_ms=baseline_ms, candidate_ms=candidate_ms,
        delta_ms=delta, change_percent=change, baseline_share_percent=share, status=status,
        gating=gate, fails=gate and status == "slower",
    )


def _headline(rows: dict[str, dict[str, float]], noise: NoiseEstimate, config: CompareSettings) -> list[MetricChange]:
    busy = rows["baseline"]["busy_time_ms"]
    return [
        metric_change("headline", column, label, rows["baseline"][column], rows["candidate"][column],
                busy_ms=busy, gate=gate, noise=noise, config=config)
        for column, label, gate in HEADLINE_METRICS
    ]


def _side_means(db: duckdb.DuckDBPyConnection, params: dict, mart: str, keys: tuple[str, ...],
                aggregates: dict[str, str]) -> list[dict]:
    """One row per key of a per-trace mart, with `baseline_<name>` and `candidate_<name>` for each
    aggregate (the mean per trace of that side; absent when the side lacks the key)."""
    sql = SIDE_MEANS_SQL.format(keys=", ".join(f"facts.{k}" for k in keys), mart=mart,
                                aggregates=", ".join(f"{sql} as {name}" for name, sql in aggregates.items()))
    rows: dict[tuple, dict] = {}
    for row in query_rows(db, sql, [params["baseline"], params["candidate"]]):
        key = tuple(row[k] for k in keys)
        merged = rows.setdefault(key, dict(zip(keys, key, strict=True)))
        merged.update({f"{row['side']}_{name}": row[name] for name in aggregates})
    return list(rows.values())


def _mean_time(row: dict, side: str) -> float | None:
    """A side's mean kernel time; None when it is absent or zero."""
    return row.get(f"{side}_kernel_time_ms") or None


def _with_time(rows: list[dict]) -> list[dict]:
    """The rows with kernel time on either side."""
    return [r for r in rows if (r.get("baseline_kernel_time_ms") or 0.0) + (r.get("candidate_kernel_time_ms") or 0.0) > 0]


def _categories(db: duckdb.DuckDBPyConnection, params: dict, busy_ms: float, noise: NoiseEstimate,
                config: CompareSettings) -> list[MetricChange]:
    means = "sum(facts.kernel_time_ms) / any_value(sides.trace_count)"
    rows = _with_time(_side_means(db, params, "trace_category_kernel_time", CATEGORY_KEYS, {"kernel_time_ms": means}))
    changes = [
        metric_change("category", r["category"], f"{r['category']} kernel time", _mean_time(r, "baseline"),
                      _mean_time(r, "candidate"), busy_ms=busy_ms, gate=True, noise=noise, config=config)
        for r in rows
    ]
    return sorted(changes, key=lambda c: (-abs(c.delta_ms), c.name))


def _op_label(row: dict) -> str:
    return f"{row['name']} {row['input_dims']}".strip()


def _ops(diff: OpKernelDiff, busy_ms: float, noise: NoiseEstimate, config: CompareSettings) -> list[OpSignatureChange]:
    """Each op signature of the op diff with kernel time on either side, judged like a category."""
    ops = []
    for row in diff.ops.filter(pl.col("baseline_ms").fill_null(0.0) + pl.col("candidate_ms").fill_null(0.0) > 0
                               ).iter_rows(named=True):
        baseline_ms, candidate_ms = row["baseline_ms"] or None, row["candidate_ms"] or None
        change = metric_change("op", row["name"], _op_label(row), baseline_ms, candidate_ms,
                               busy_ms=busy_ms, gate=True, noise=noise, config=config)
        ops.append(OpSignatureChange(
            **change.model_dump(), op_category=row["op_category"], input_dims=row["input_dims"],
            input_type=row["input_type"], input_strides=row["input_strides"], concrete_inputs=row["concrete_inputs"],
            baseline_calls=row["baseline_count"], candidate_calls=row["candidate_count"],
        ))
    # largest absolute change first
    return sorted(ops, key=lambda o: (-abs((o.candidate_ms or 0.0) - (o.baseline_ms or 0.0)), o.name, o.input_dims,
                                      o.input_type, o.input_strides, o.concrete_inputs))


# ---- verdict ----------------------------------------------------------------------------------

def _metric_confidence(metric: MetricChange, noise: NoiseEstimate, baseline: SideSamples,
                       candidate: SideSamples, config: CompareSettings) -> Confidence:
    """low: noise unknown, or the change lies within one noise band of the decision boundary;
    high: both sides have enough samples of their own; medium otherwise."""
    if not noise.estimated or noise.band_percent is None or metric.change_percent is None:
        return "low"
    boundary = max(config.threshold_percent, noise.band_percent)
    if abs(abs(metric.change_percent) - boundary) <= noise.band_percent:
        return "low"
    enough = config.min_samples_high_confidence
    if not noise.borrowed_spread and min(baseline.sample_count, candidate.sample_count) >= enough:
        return "high"
    return "medium"


def _deciding(metrics: list[MetricChange], rank: dict[Confidence, int], confidence_of) -> MetricChange:
    """The most certain metric, headline metrics first, then the largest absolute change."""
    return min(metrics, key=lambda m: (rank[confidence_of(m)], m.kind != "headline", -abs(m.delta_ms)))


def _noise_text(noise: NoiseEstimate, baseline: SideSamples, candidate: SideSamples) -> str:
    if baseline.sample_source == candidate.sample_source:
        samples = f"{baseline.sample_count} vs {candidate.sample_text}"
    else:
        samples = f"{baseline.sample_text} vs {candidate.sample_text}"
    if noise.band_percent is None:
        return f"noise not estimated, {samples}; threshold alone"
    return f"noise ±{noise.band_percent:.1f} %, {samples}"


def _summary(verdict: VerdictKind, deciding: MetricChange, total: MetricChange, failures: int,
             noise_text: str, confidence: Confidence, config: CompareSettings) -> str:
    tail = f"({noise_text}, {confidence} confidence)"
    if verdict == "no_change":
        change = 0.0 if total.change_percent is None else total.change_percent
        return (f"NO CHANGE: total GPU time {change:+.1f} %, nothing slower beyond the "
                f"{config.threshold_percent:g} % threshold {tail}")
    word = "slower" if verdict == "regression" else "faster"
    amount = abs(deciding.change_percent or 0.0)
    if deciding.kind == "headline":
        subject = f"candidate is {amount:.1f} % {word} in {deciding.label}"
    else:
        kind = "op category" if deciding.kind == "category" else "op"
        label = deciding.label
        if len(label) > SUMMARY_LABEL_CHARS:
            label = label[: SUMMARY_LABEL_CHARS - 3] + "..."
        subject = f"{kind} {label} is {amount:.1f} % {word}"
    extras = []
    if deciding is not total and total.change_percent is not None:
        extras.append(f"total GPU time {total.change_percent:+.1f} %")
    if verdict == "regression" and failures > 1:
        extras.append(f"{failures} metrics fail")
    extra = f"; {', '.join(extras)}" if extras else ""
    return f"{verdict.upper()}: {subject}{extra} {tail}"


def _verdict(headline: list[MetricChange], items: list[MetricChange], noise: NoiseEstimate,
             baseline: SideSamples, candidate: SideSamples, config: CompareSettings
             ) -> tuple[VerdictKind, Confidence, MetricChange, str]:
    rank: dict[Confidence, int] = {"high": 0, "medium": 1, "low": 2}

    def confidence_of(metric: MetricChange) -> Confidence:
        return _metric_confidence(metric, noise, baseline, candidate, config)

    total = headline[0]
    gating = [m for m in headline + items if m.gating]
    failing = [m for m in gating if m.fails]
    faster = [m for m in gating if m.status == "faster"]
    if failing:
        verdict: VerdictKind = "regression"
        deciding = _deciding(failing, rank, confidence_of)
        confidence = confidence_of(deciding)
    elif faster:
        verdict = "improvement"
        deciding = _deciding(faster, rank, confidence_of)
        confidence = confidence_of(deciding)
    else:  # as sure as the least certain headline gate
        verdict = "no_change"
        gates = [m for m in headline if m.gating]
        deciding = max(gates, key=lambda m: rank[confidence_of(m)])
        confidence = confidence_of(deciding)
    noise_text = _noise_text(noise, baseline, candidate)
    summary = _summary(verdict, deciding, total, len(failing), noise_text, confidence, config)
    return verdict, confidence, deciding, summary


# ---- entry point --------------------------------------------------------------------------------

def _load_sides(db: duckdb.DuckDBPyConnection, params: dict) -> tuple[dict[str, list[dict]], dict[str, list[dict]]]:
    sides = {side: params[side] for side in ("baseline", "candidate")}
    trace_ids = list(dict.fromkeys(params["baseline"] + params["candidate"]))
    trace_rows = query_rows(db, TRACES_SQL, [trace_ids])
    missing = sorted(set(trace_ids) - {r["trace_id"] for r in trace_rows})
    if missing:
        raise ComparisonError(f"trace {missing[0]} is not in the warehouse; `tracelake traces` lists them")
    by_side = {side: [r for r in trace_rows if r["trace_id"] in ids] for side, ids in sides.items()}
    no_gpu = [r for rows in by_side.values() for r in rows if not r["has_gpu_work"]]
    if no_gpu:
        raise ComparisonError(
            f"trace {no_gpu[0]['trace_id']} ({no_gpu[0]['file_name']}) has no GPU work linked to a host "
            "launch; compare needs GPU kernels on both sides"
        )
    step_rows = query_rows(db, STEPS_SQL, [trace_ids])
    steps = {side: [r for r in step_rows if r["trace_id"] in ids] for side, ids in sides.items()}
    return by_side, steps


def _pooled_means(rows: list[dict]) -> dict[str, float]:
    return {column: sum(float(r[column] or 0.0) for r in rows) / len(rows) for column, _, _ in HEADLINE_METRICS}


def _not_comparable(overlap: float, headline: list[MetricChange], categories: list[MetricChange],
                    ops: list[OpSignatureChange], baseline: SideSamples, candidate: SideSamples,
                    noise: NoiseEstimate, config: CompareSettings) -> RegressionVerdict:
    """The sides share too little of their op kernel time to say that one is slower at the same
    work: every metric is listed, none gates."""
    for metric in [*headline, *categories, *ops]:
        metric.gating = metric.fails = False
    new = sum(op.status == "new" for op in ops)
    gone = sum(op.status == "gone" for op in ops)
    summary = (f"NOT COMPARABLE: the sides share {overlap:.1f} % of their op kernel time in common op signatures "
               f"(at least {config.min_signature_overlap_percent:g} % needed; {new + gone} of {len(ops)} signatures "
               "new or gone): they ran different work, so no regression is called")
    return RegressionVerdict(
        verdict="not_comparable", regression=False, signature_overlap_percent=overlap, summary=summary,
        confidence="low", deciding_metric="op signature overlap", settings=config, baseline=baseline,
        candidate=candidate, noise=noise, headline=headline, categories=categories, ops=ops, failures=[],
        device_warning=device_warning(baseline, candidate),
    )


def compare(
    db: duckdb.DuckDBPyConnection,
    baseline_ids: list[str],
    candidate_ids: list[str],
    config: CompareSettings | None = None,
) -> RegressionVerdict:
    """Compare the candidate traces with the baseline traces (each side pooled as repeated samples)."""
    config = config or CompareSettings()
    if not baseline_ids or not candidate_ids:
        raise ComparisonError("both the baseline and the candidate need at least one trace")
    params = {"baseline": list(dict.fromkeys(baseline_ids)), "candidate": list(dict.fromkeys(candidate_ids))}
    trace_rows, step_rows = _load_sides(db, params)
    baseline = _side_samples(trace_rows["baseline"], step_rows["baseline"])
    candidate = _side_samples(trace_rows["candidate"], step_rows["candidate"])
    noise = estimate_noise(baseline, candidate, config)
    means = {side: _pooled_means(rows) for side, rows in trace_rows.items()}
    headline = _headline(means, noise, config)
    busy = means["baseline"]["busy_time_ms"]
    categories = _categories(db, params, busy, noise, config)
    diff = diff_traces(db, params["baseline"], params["candidate"])
    ops = _ops(diff, busy, noise, config)
    overlap = diff.signature_overlap_percent()
    if overlap < config.min_signature_overlap_percent:
        return _not_comparable(overlap, headline, categories, ops, baseline, candidate, noise, config)
    verdict, confidence, deciding, summary = _verdict(headline, [*categories, *ops], noise, baseline, candidate, config)
    failures = [m.label for m in [*headline, *categories, *ops] if m.fails]
    return RegressionVerdict(
        verdict=verdict, regression=verdict == "regression", signature_overlap_percent=overlap,
        summary=summary, confidence=confidence,
        deciding_metric=deciding.label, settings=config, baseline=baseline, candidate=candidate,
        noise=noise, headline=headline, categories=categories, ops=ops, failures=failures,
        device_warning=device_warning(baseline, candidate),
    )
