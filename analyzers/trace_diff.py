"""The op and kernel diff of two sets of traces (HTA's TraceDiff: ops added, removed and changed,
with counts and durations on each side), read from two per-trace marts:

- ops: `trace_op_signature_time` (op_perf on one platform per trace), keyed by op signature: name +
  input dims + input types + strides + concrete inputs, summed over threads;
- kernels: `kernels` (the GPU events linked to a host launch, as `gpu_timeline` and compare's GPU
  kernel time count them), keyed by kernel name.

Each side is the mean per trace over its traces (a side of several traces is repeated samples of
one workload). `tracelake compare` judges its op signatures on this diff, and `tracelake.diff`
returns it, so both read the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import polars as pl

if TYPE_CHECKING:
    import duckdb

DiffStatus = Literal["added", "removed", "changed", "unchanged"]
OP_SIGNATURE_KEYS = ("name", "input_dims", "input_type", "input_strides", "concrete_inputs")

# The traces of the two sides; a trace may be on both (a trace against itself).
_SIDES_CTE = """
sides as (
    select unnest($baseline) as trace_id, 'baseline' as side, len($baseline) as trace_count
    union all
    select unnest($candidate) as trace_id, 'candidate' as side, len($candidate) as trace_count
)"""

# {keys}: the diff's key columns; {per_side}: one row per side and key with `count` and `time_ms`
# (the mean per trace of that side); {attribute}: a descriptive column taken from either side.
_DIFF_SQL = """
with
{sides},
per_side as (
{per_side}
),
baseline as (select * from per_side where side = 'baseline'),
candidate as (select * from per_side where side = 'candidate'),
joined as (
    select
        {key_columns},
        coalesce(baseline.{attribute}, candidate.{attribute}) as {attribute},
        baseline.count as baseline_count,
        candidate.count as candidate_count,
        baseline.time_ms as baseline_ms,
        candidate.time_ms as candidate_ms
    from baseline
    full outer join candidate on {key_match}
),
final as (
    select
        *,
        case
            when baseline_count is null then 'added'
            when candidate_count is null then 'removed'
            when baseline_count = candidate_count and baseline_ms = candidate_ms then 'unchanged'
            else 'changed'
        end as status,
        coalesce(candidate_count, 0) - coalesce(baseline_count, 0) as count_delta,
        coalesce(candidate_ms, 0) - coalesce(baseline_ms, 0) as delta_ms,
        case when baseline_ms > 0 and candidate_ms is not null
            then 100.0 * (candidate_ms - baseline_ms) / baseline_ms end as change_percent
    from joined
)
select * from final
order by abs(delta_ms) desc, {order_keys}
"""

_OPS_PER_SIDE = """
    select sides.side, {keys},
        min(facts.op_category) as op_category,
        sum(facts.calls) / any_value(sides.trace_count) as count,
        sum(facts.kernel_time_ms) / any_value(sides.trace_count) as time_ms
    from sides inner join trace_op_signature_time as facts on facts.trace_id = sides.trace_id
    group by all"""

_KERNELS_PER_SIDE = """
    select sides.side, facts.name,
        min(facts.kernel_category) as kernel_category,
        count(*) / any_value(sides.trace_count) as count,
        sum(facts.dur_us) / 1000.0 / any_value(sides.trace_count) as time_ms
    from sides inner join kernels as facts on facts.trace_id = sides.trace_id
    where facts.is_linked
    group by all"""


def _diff_sql(per_side: str, keys: tuple[str, ...], attribute: str) -> str:
    return _DIFF_SQL.format(
        sides=_SIDES_CTE, per_side=per_side, attribute=attribute,
        key_columns=", ".join(f"coalesce(baseline.{k}, candidate.{k}) as {k}" for k in keys),
        key_match=" and ".join(f"baseline.{k} is not distinct from candidate.{k}" for k in keys),
        order_keys=", ".join(keys),
    )


OPS_DIFF_SQL = _diff_sql(_OPS_PER_SIDE.format(keys=", ".join(f"facts.{k}" for k in OP_SIGNATURE_KEYS)),
                         OP_SIGNATURE_KEYS, "op_category")
KERNELS_DIFF_SQL = _diff_sql(_KERNELS_PER_SIDE, ("name",), "kernel_category")

_OP_COLUMNS = [*OP_SIGNATURE_KEYS, "op_category", "status", "baseline_count", "candidate_count", "count_delta",
               "baseline_ms", "candidate_ms", "delta_ms", "change_percent"]
_KERNEL_COLUMNS = ["name", "kernel_category", "status", "baseline_count", "candidate_count", "count_delta",
                   "baseline_ms", "candidate_ms", "delta_ms", "change_percent"]


@dataclass(frozen=True)
class OpKernelDiff:
    """The diff of two sides: one row per op signature (`ops`) and per kernel name (`kernels`),
    largest absolute time change first. Counts and times are means per trace of each side (null
    where the side lacks the row); `status` is added / removed / changed / unchanged."""

    baseline_ids: list[str]
    candidate_ids: list[str]
    ops: pl.DataFrame
    kernels: pl.DataFrame

    def counts(self) -> pl.DataFrame:
        """Rows per status of `ops` and of `kernels`, with each side's ms (HTA's counts diff)."""
        return pl.concat([
            frame.group_by("status").agg(pl.len().alias("rows"), pl.col("baseline_ms").sum(),
                                         pl.col("candidate_ms").sum(), pl.col("delta_ms").sum())
            .with_columns(pl.lit(what).alias("what"))
            for what, frame in (("ops", self.ops), ("kernels", self.kernels))
        ]).select("what", "status", "rows", "baseline_ms", "candidate_ms", "delta_ms").sort("what", "status")

    def signature_overlap_percent(self) -> float:
        """The smaller of the two sides' shares of op kernel time spent in signatures both sides
        run: how much of the work the op diff can compare at all (100 for a trace against itself)."""
        shared = self.ops.filter(pl.col("baseline_count").is_not_null() & pl.col("candidate_count").is_not_null())
        shares = []
        for side in ("baseline_ms", "candidate_ms"):
            total = float(self.ops[side].fill_null(0.0).sum())
            shares.append(100.0 * float(shared[side].sum()) / total if total > 0 else 0.0)
        return min(shares)


def diff_traces(db: duckdb.DuckDBPyConnection, baseline_ids: list[str], candidate_ids: list[str]) -> OpKernelDiff:
    """The op and kernel diff of the candidate traces against the baseline traces."""
    params = {"baseline": list(dict.fromkeys(baseline_ids)), "candidate": list(dict.fromkeys(candidate_ids))}
    ops = db.execute(OPS_DIFF_SQL, params).pl().select(_OP_COLUMNS)
    kernels = db.execute(KERNELS_DIFF_SQL, params).pl().select(_KERNEL_COLUMNS)
    return OpKernelDiff(baseline_ids=params["baseline"], candidate_ids=params["candidate"], ops=ops, kernels=kernels)
