"""Comparative scope: match the ops of trace 1 (baseline) with those of trace 2 (target).

Ops are matched on what they compute: the op name with its input shapes and dtypes. Ops whose
names differ between the two traces (vendor-specific kernels behind a different aten op, e.g.
one flash-attention variant for another) are matched in a second pass on the model layer they
run in (`nn.Module` path), their op category and their first input shape; several candidates in
one layer pair up in order of kernel time. What stays unmatched is listed for both sides.

Efficiency of a matched op = 100 x t2 / t1: below 100 % trace 1 is slower (an opportunity for
trace 1), above 100 % trace 2 is slower.
"""

from __future__ import annotations

from typing import Any, Literal

import duckdb
from pydantic import BaseModel, Field

MatchedBy = Literal["name_and_shapes", "module_path"]


class OpMatch(BaseModel):
    """One op of trace 1 (name + shapes + dtypes, summed over threads and strides) and its match."""

    name: str
    op_category: str
    input_dims: str
    input_type: str
    module_path: str
    count_trace1: int
    time_trace1_ms: float
    name_trace2: str
    count_trace2: int
    time_trace2_ms: float
    difference_ms: float  # trace 2 - trace 1: negative when trace 1 is slower
    efficiency_percent: float | None  # 100 x t2 / t1; None when t1 has no kernel time
    matched_by: MatchedBy


class UnmatchedOp(BaseModel):
    name: str
    op_category: str
    input_dims: str
    input_type: str
    module_path: str
    count: int
    time_ms: float


class OpComparison(BaseModel):
    trace1_id: str
    trace2_id: str
    platform1: str
    platform2: str
    matched: list[OpMatch] = Field(default_factory=list)  # trace 1 kernel time first
    only_in_trace1: list[UnmatchedOp] = Field(default_factory=list)
    only_in_trace2: list[UnmatchedOp] = Field(default_factory=list)
    time_trace1_ms: float = 0.0  # kernel time of every op of trace 1
    time_trace2_ms: float = 0.0
    matched_time_trace1_ms: float = 0.0
    matched_time_trace2_ms: float = 0.0


class SignatureMatch(BaseModel):
    """Trace 2's share of the match of one op signature of trace 1 (op_perf.signature_key).

    A match covers every signature of trace 1 with the same name, shapes and dtypes; trace 2's
    time and count are split over them in proportion to their trace-1 kernel time."""

    signature_key: str
    name_trace2: str
    count_trace2: float
    time_trace2_ms: float
    efficiency_percent: float | None
    matched_by: MatchedBy


# The ops of one trace on one platform, summed per (name, category, shapes, dtypes).
_OPS_CTE = """
ops{n} as (
    select
        name,
        op_category,
        coalesce(input_dims, '') as input_dims,
        coalesce(input_type, '') as input_type,
        coalesce(arg_max(array_to_string(module_chain, ' > '), kernel_time_sum_us), '') as module_path,
        -- synthetic ops (kernels no cpu op launched) have no input dims
        coalesce(case when json_valid(any_value(input_dims)) then json_extract(any_value(input_dims), '$[0]')::varchar end,
                 '') as first_shape,
        sum(operation_count) as op_count,
        sum(kernel_time_sum_us) / 1000.0 as time_ms
    from op_perf
    where trace_id = $trace{n} and platform = $platform{n}
    group by all
)"""

# The ops of one trace that the name pass left unmatched, numbered within their layer.
_REST_CTE = """
rest{n} as (
    select ops{n}.*,
        row_number() over (partition by op_category, module_path, first_shape order by time_ms desc, name) as pair_rank
    from ops{n}
    where module_path <> ''
        and not exists (select 1 from by_name
                        where by_name.name = ops{n}.name and by_name.input_dims = ops{n}.input_dims
                            and by_name.input_type = ops{n}.input_type)
)"""

MATCHES_SQL = f"""
with
{_OPS_CTE.format(n=1)},
{_OPS_CTE.format(n=2)},
by_name as (
    select ops1.*, ops2.name as name2, ops2.op_category as op_category2, ops2.input_dims as input_dims2,
        ops2.input_type as input_type2, ops2.op_count as op_count2, ops2.time_ms as time2_ms,
        'name_and_shapes' as matched_by
    from ops1
    inner join ops2
        on ops1.name = ops2.name and ops1.input_dims = ops2.input_dims and ops1.input_type = ops2.input_type
),
{_REST_CTE.format(n=1)},
{_REST_CTE.format(n=2)},
by_module as (
    select rest1.* exclude (pair_rank), rest2.name as name2, rest2.op_category as op_category2,
        rest2.input_dims as input_dims2, rest2.input_type as input_type2, rest2.op_count as op_count2,
        rest2.time_ms as time2_ms, 'module_path' as matched_by
    from rest1
    inner join rest2
        on rest1.op_category = rest2.op_category and rest1.module_path = rest2.module_path
        and rest1.first_shape = rest2.first_shape and rest1.pair_rank = rest2.pair_rank
),
matches as (
    select * from by_name
    union all
    select * from by_module
)
"""

_MATCHED_SQL = MATCHES_SQL + """
select name, op_category, input_dims, input_type, module_path, op_count, time_ms,
    name2, op_count2, time2_ms, time2_ms - time_ms as difference_ms,
    case when time_ms > 0 then 100.0 * time2_ms / time_ms end as efficiency_percent, matched_by
from matches
order by time_ms desc, name, input_dims
"""

# {side}: "" for trace 1's columns of a match, "2" for trace 2's
_UNMATCHED_SQL = MATCHES_SQL + """
select name, op_category, input_dims, input_type, module_path, op_count, time_ms
from ops{n}
where not exists (
    select 1 from matches
    where matches.name{side} = ops{n}.name and matches.op_category{side} = ops{n}.op_category
        and matches.input_dims{side} = ops{n}.input_dims and matches.input_type{side} = ops{n}.input_type)
order by time_ms desc, name, input_dims
"""

_TOTALS_SQL = """
select
    (select coalesce(sum(kernel_time_sum_us), 0) / 1000.0 from op_perf where trace_id = $trace1 and platform = $platform1),
    (select coalesce(sum(kernel_time_sum_us), 0) / 1000.0 from op_perf where trace_id = $trace2 and platform = $platform2)
"""

_SIGNATURES_SQL = MATCHES_SQL + """
select
    p.signature_key,
    matches.name2,
    matches.op_count2 * p.kernel_time_sum_us / 1000.0 / nullif(matches.time_ms, 0) as count2,
    matches.time2_ms * p.kernel_time_sum_us / 1000.0 / nullif(matches.time_ms, 0) as time2_ms,
    case when matches.time_ms > 0 then 100.0 * matches.time2_ms / matches.time_ms end as efficiency_percent,
    matches.matched_by
from op_perf as p
inner join matches
    on p.name = matches.name and p.op_category = matches.op_category
    and coalesce(p.input_dims, '') = matches.input_dims and coalesce(p.input_type, '') = matches.input_type
where p.trace_id = $trace1 and p.platform = $platform1
"""


def _params(trace1: str, platform1: str, trace2: str, platform2: str) -> dict[str, str]:
    return {"trace1": trace1, "platform1": platform1, "trace2": trace2, "platform2": platform2}


def compare_ops(db: duckdb.DuckDBPyConnection, trace1: str, platform1: str, trace2: str, platform2: str) -> OpComparison:
    """Every op of trace 1 matched to trace 2 where possible, and what stays unmatched on each side."""
    params = _params(trace1, platform1, trace2, platform2)
    matched = [
        OpMatch(name=r[0], op_category=r[1], input_dims=r[2], input_type=r[3], module_path=r[4],
                count_trace1=int(r[5]), time_trace1_ms=r[6], name_trace2=r[7], count_trace2=int(r[8]),
                time_trace2_ms=r[9], difference_ms=r[10], efficiency_percent=r[11], matched_by=r[12])
        for r in db.execute(_MATCHED_SQL, params).fetchall()
    ]

    def unmatched(n: int) -> list[UnmatchedOp]:
        rows = db.execute(_UNMATCHED_SQL.format(n=n, side="" if n == 1 else "2"), params).fetchall()
        return [UnmatchedOp(name=r[0], op_category=r[1], input_dims=r[2], input_type=r[3], module_path=r[4],
                            count=int(r[5]), time_ms=r[6]) for r in rows]

    total1, total2 = db.execute(_TOTALS_SQL, params).fetchone() or (0.0, 0.0)
    return OpComparison(
        trace1_id=trace1, trace2_id=trace2, platform1=platform1, platform2=platform2,
        matched=matched, only_in_trace1=unmatched(1), only_in_trace2=unmatched(2),
        time_trace1_ms=total1, time_trace2_ms=total2,
        matched_time_trace1_ms=sum(m.time_trace1_ms for m in matched),
        matched_time_trace2_ms=sum(m.time_trace2_ms for m in matched),
    )


def signature_matches(db: duckdb.DuckDBPyConnection, trace1: str, platform1: str, trace2: str,
                      platform2: str) -> dict[str, SignatureMatch]:
    """Trace 2's time for every matched op signature of trace 1, keyed by signature_key."""
    rows = db.execute(_SIGNATURES_SQL, _params(trace1, platform1, trace2, platform2)).fetchall()
    return {r[0]: SignatureMatch(signature_key=r[0], name_trace2=r[1], count_trace2=r[2] or 0.0,
                                 time_trace2_ms=r[3] or 0.0, efficiency_percent=r[4], matched_by=r[5])
            for r in rows}


def evidence_sql(trace1: str, platform1: str, trace2: str, platform2: str,
                 ops: list[tuple[str, str, str]]) -> str:
    """A query that reproduces the matched times of trace 1's ops (name, input dims, input type)."""
    def literal(value: str) -> str:
        return "'" + value.replace("'", "''") + "'"

    sql = MATCHES_SQL
    for key, value in _params(trace1, platform1, trace2, platform2).items():
        sql = sql.replace(f"${key}", literal(value))
    keys = ", ".join(f"({literal(n)}, {literal(d)}, {literal(t)})" for n, d, t in sorted(set(ops))) or "('', '', '')"
    return (sql.strip() + "\nselect name, input_dims, op_count, time_ms as time_trace1_ms, name2, op_count2, "
            "time2_ms as time_trace2_ms, 100.0 * time2_ms / nullif(time_ms, 0) as efficiency_percent, matched_by\n"
            f"from matches where (name, input_dims, input_type) in ({keys})\norder by time_ms desc")


class CategoryTime(BaseModel):
    """A row of trace2_ops_summary_by_category (TraceLens' keys)."""

    op_category: str
    count: int
    total_direct_kernel_time_ms: float
    percentage: float
    cumulative_percentage: float

    def seed_keys(self) -> dict[str, Any]:
        return {"op category": self.op_category, "Count": self.count,
                "total_direct_kernel_time_ms": self.total_direct_kernel_time_ms,
                "Percentage (%)": self.percentage, "Cumulative Percentage (%)": self.cumulative_percentage}


def category_times(db: duckdb.DuckDBPyConnection, trace_id: str, platform: str) -> list[CategoryTime]:
    """Kernel time per op category of the unified perf table (op_perf), as TraceLens builds
    trace2_ops_summary_by_category from trace 2's unified_perf_summary: the categories the
    compute agents see (the ops_summary_by_category mart counts direct kernel time instead)."""
    rows = db.execute("""
        with categories as (
            select op_category, sum(operation_count) as op_count, sum(kernel_time_sum_us) / 1000.0 as time_ms
            from op_perf where trace_id = ? and platform = ?
            group by op_category
        ),
        shares as (
            select *, 100.0 * time_ms / nullif(sum(time_ms) over (), 0) as percentage
            from categories
        )
        select op_category, op_count, time_ms, coalesce(percentage, 0),
            coalesce(sum(percentage) over (order by time_ms desc, op_category rows unbounded preceding), 0)
        from shares order by time_ms desc, op_category
    """, [trace_id, platform]).fetchall()
    return [CategoryTime(op_category=r[0], count=int(r[1]), total_direct_kernel_time_ms=r[2], percentage=r[3],
                         cumulative_percentage=r[4]) for r in rows]
