"""TraceLens-compatible collective CSVs of a job (TraceLens NcclAnalyser's multi-rank collective
report): the same file names, column names and column order, read from the job marts
(collective_calls, collective_instances, job_straggler_summary, alltoall_instances).

Times are TraceLens' absolute µs (jobs.epoch_us + the job clock). Where TraceLens leaves a column
empty because the kernels carry no process-group metadata (2023 traces), the marts fill it from
what the trace says (the nccl:* annotation's name and sizes, the world as the group); every
difference is listed in docs/collective_report.md.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from tracelake.core.errors import TraceLakeError
from tracelake.reports.csv_files import write_csv

MB = 1048576.0  # TraceLens' MB: 2^20 bytes
AGG_METRICS = ("mean", "median", "min", "max")
JOB_MARTS = ("jobs", "job_ranks", "collective_calls", "collective_instances", "job_straggler_summary",
             "alltoall_instances")  # the report's agg_metrics (expected CSVs' columns)

# TraceLens' collective_id: the stream index in its simplified mode, else "<pg>_<index>"
# (p2p instances have their own ordinals here, so their ids carry "p2p_")
_COLLECTIVE_ID = """case when {t}.match_method = 'stream_ordinal' then {t}.index_in_group::varchar
    else {t}.pg_name || case when {t}.collective_kind = 'p2p' then '_p2p_' else '_' end || {t}.index_in_group end"""
_LIST_TEXT = "case when {c} is not null then '[' || array_to_string({c}, ', ') || ']' end"
_NAME = "coalesce(c.collective_name_raw, nullif(c.collective_name, 'unknown'))"
# the instances TraceLens' nccl_implicit_sync and straggler_summary cover
_IMPLICIT_SYNC = """not i.is_desync and (i.collective_kind = 'implicit_sync'
    or (i.match_method = 'stream_ordinal' and i.collective_name = 'unknown'))"""

_CALLS = f"""
    select c.*, i.node_span, i.group_size as instance_group_size, i.first_start_us,
        j.epoch_us + c.start_us as ts,
        {_COLLECTIVE_ID.format(t='i')} as collective_id,
        {_NAME} as name_text,
        {_LIST_TEXT.format(c='c.pg_ranks')} as pg_ranks_text,
        {_LIST_TEXT.format(c='c.in_split_sizes')} as in_split_text,
        {_LIST_TEXT.format(c='c.out_split_sizes')} as out_split_text,
        c.in_nelems * c.dtype_bytes / {MB} as in_mb,
        c.out_nelems * c.dtype_bytes / {MB} as out_mb
    from collective_calls as c
    inner join jobs as j on c.job_id = j.job_id
    inner join collective_instances as i on c.job_id = i.job_id and c.instance_id = i.instance_id
    where c.job_id = $job_id
"""


def _integral_as_int(table: pa.Table) -> pa.Table:
    """Float columns whose values are all whole numbers written as integers, as TraceLens writes
    the ts / dur it read from the JSON (`10`, not `10.0`)."""
    for index, field in enumerate(table.schema):
        if not pa.types.is_floating(field.type):
            continue
        column = table.column(index)
        values = column.drop_null()
        if len(values) == 0 or not pc.all(pc.equal(values, pc.floor(values))).as_py():
            continue
        if pc.max(pc.abs(values)).as_py() >= 2**53:
            continue
        table = table.set_column(index, field.name, pc.cast(column, pa.int64()))
    return table


def _query(db: duckdb.DuckDBPyConnection, sql: str, job_id: str) -> pa.Table:
    return _integral_as_int(db.sql(sql, params={"job_id": job_id}).to_arrow_table())


def _job_ranks(db: duckdb.DuckDBPyConnection, job_id: str) -> list[int]:
    rows = db.execute("select rank from job_ranks where job_id = $job_id order by rank", {"job_id": job_id})
    return [int(row[0]) for row in rows.fetchall()]


def nccl_long_sql() -> str:
    return f"""
    with calls as ({_CALLS})
    select collective_id, index_in_group, rank, coalesce(pg_name, 'all') as "Process Group Name",
        pg_ranks_text as "Process Group Ranks", name_text as "Collective name",
        coalesce(group_size, instance_group_size) as "Group size", dtype,
        in_nelems as "In msg nelems", in_mb as "In msg size (MB)",
        out_nelems as "Out msg nelems", out_mb as "Out msg size (MB)",
        in_split_text as "In split size", out_split_text as "Out split size",
        stream, ts, dur_us as dur, node_id, node_span
    from calls
    order by rank, start_us, event_idx
    """


def nccl_summary_long_sql() -> str:
    return f"""
    with calls as ({_CALLS})
    select rank, coalesce(pg_name, 'all') as "Process Group Name", pg_ranks_text as "Process Group Ranks",
        name_text as "Collective name", coalesce(group_size, instance_group_size) as "Group size", dtype,
        in_nelems as "In msg nelems", out_nelems as "Out msg nelems",
        in_split_text as "In split size", out_split_text as "Out split size", stream,
        first(in_mb order by start_us) as "In msg size (MB)_first",
        first(out_mb order by start_us) as "Out msg size (MB)_first",
        sum(dur_us) as dur_sum, avg(dur_us) as dur_mean, stddev_samp(dur_us) as dur_std,
        min(dur_us) as dur_min, max(dur_us) as dur_max, count(*) as operation_count
    from calls
    group by all
    order by dur_sum desc, rank
    """


def nccl_implicit_sync_sql(ranks: list[int]) -> str:
    per_rank = [f'max(ts) filter (where rank = {r}) as "rank_{r}_ts", '
                f'max(dur_us) filter (where rank = {r}) as "rank_{r}_dur"' for r in ranks]
    waits = [f'max(wait_us) filter (where rank = {r}) as "rank_{r}_wait_time"' for r in ranks]
    rank_columns = [f'p."rank_{r}_ts", p."rank_{r}_dur"' for r in ranks] + [f'p."rank_{r}_wait_time"' for r in ranks]
    return f"""
    with calls as ({_CALLS}),
    per_instance as (
        select instance_id, arg_min(pg_ranks_text, rank) as pg_ranks_text, arg_min(name_text, rank) as name_text,
            arg_min(in_nelems, rank) as in_nelems, arg_min(out_nelems, rank) as out_nelems,
            arg_min(in_mb, rank) as in_mb, arg_min(out_mb, rank) as out_mb{"".join(", " + c for c in per_rank + waits)}
        from calls
        group by instance_id
    )
    select {_COLLECTIVE_ID.format(t='i')} as collective_id, i.pg_name as "Process Group Name",
        p.pg_ranks_text as "Process Group Ranks", p.name_text as "Collective name",
        i.group_size as "Group size", i.dtype, p.in_nelems as "In msg nelems", p.out_nelems as "Out msg nelems",
        p.in_mb as "In msg size (MB)", p.out_mb as "Out msg size (MB)", i.msg_bytes / {MB} as "Full msg size (MB)",
        i.comm_latency_us as comm_latency, i.start_skew_us as "skew in start time",
        i.earliest_arrival_rank as "earliest arrival rank", i.avg_wait_us as avg_wait_time,
        i.end_skew_us as "skew in end time", i.algo_gib_per_s as "algo bw (GB/s)",
        i.bus_gib_per_s as "bus bw (GB/s)", {"".join(c + ", " for c in rank_columns)}i.node_span
    from collective_instances as i
    inner join per_instance as p on i.instance_id = p.instance_id
    where i.job_id = $job_id and {_IMPLICIT_SYNC}
    order by i.first_start_us, i.instance_id
    """


def _aggregates(column: str, metrics: tuple[str, ...]) -> list[str]:
    functions = {"mean": "avg", "median": "median", "min": "min", "max": "max", "sum": "sum"}
    return [f'{functions[m]}("{column}") as "{column}_{m}"' for m in metrics]


def nccl_summary_implicit_sync_sql(ranks: list[int], with_bandwidth: bool) -> str:
    metrics = ["comm_latency", "skew in start time", "skew in end time"]
    if with_bandwidth:
        metrics += ["algo bw (GB/s)", "bus bw (GB/s)"]
    aggregates = [a for m in metrics for a in _aggregates(m, AGG_METRICS)]
    return f"""
    with detail as ({nccl_implicit_sync_sql(ranks)})
    select coalesce("Collective name", 'Unknown') as "Collective name", coalesce(dtype, 'Unknown') as dtype,
        coalesce("In msg nelems"::varchar, 'Unknown') as "In msg nelems",
        any_value("Process Group Name") as "Process Group Name", any_value("Group size") as "Group size",
        any_value("Full msg size (MB)") as "Full msg size (MB)",
        {", ".join(aggregates)},
        count(*) as count, sum(comm_latency) / 1000 as "Total comm latency (ms)"
    from detail
    group by 1, 2, 3
    order by "Total comm latency (ms)" desc, 1, 2, 3
    """


def straggler_summary_sql() -> str:
    return """
    select rank, round_even(total_wait_us, 1) as total_wait_time_us,
        round_even(mean_wait_us, 1) as mean_wait_time_us, times_arrived_last, times_arrived_first,
        round_even(pct_arrived_last, 1) as pct_arrived_last, num_collectives,
        round_even(total_comm_us, 1) as total_nccl_dur_us, node_id
    from job_straggler_summary
    where job_id = $job_id and num_collectives > 0
    order by total_wait_us, rank
    """


def nccl_all2allv_sql() -> str:
    return f"""
    with calls as ({_CALLS}),
    rank_throughputs as (
        select instance_id, max(in_mb / 1024 / (dur_us / 1e6)) as max_tp, min(in_mb / 1024 / (dur_us / 1e6)) as min_tp,
            arg_min(pg_ranks_text, rank) as pg_ranks_text, arg_min(name_text, rank) as name_text,
            arg_min(stream, rank) as stream
        from calls
        where collective_name = 'alltoallv'
        group by instance_id
    )
    select {_COLLECTIVE_ID.format(t='i')} as collective_id, a.pg_name as "Process Group Name",
        t.pg_ranks_text as "Process Group Ranks", t.name_text as "Collective name",
        a.group_size as "Group size", a.dtype, t.stream,
        a.total_in_bytes / {MB} as "total data communicated (MB)",
        a.total_in_nelems as "total nelems communicated", a.wall_us as "wall_time (us)",
        a.max_rank_dur_us as "max_rank_dur (us)", a.min_rank_dur_us as "min_rank_dur (us)",
        a.avg_rank_dur_us as "avg_rank_dur (us)", a.throughput_gib_per_s as "throughput (GB/s)",
        t.max_tp as "max_rank_throughput (GB/s)", t.min_tp as "min_rank_throughput (GB/s)",
        a.size_imbalance, a.start_skew_us as "skew in start time", a.end_skew_us as "skew in end time"
    from alltoall_instances as a
    inner join collective_instances as i on a.job_id = i.job_id and a.instance_id = i.instance_id
    inner join rank_throughputs as t on a.instance_id = t.instance_id
    where a.job_id = $job_id and a.collective_name = 'alltoallv'
    order by "total data communicated (MB)" desc, i.first_start_us
    """


def nccl_summary_all2allv_sql() -> str:
    aggregates = [
        *_aggregates("total data communicated (MB)", AGG_METRICS),
        *_aggregates("wall_time (us)", AGG_METRICS),
        'sum("wall_time (us)") as "Total wall_time (us)"',
        *_aggregates("throughput (GB/s)", AGG_METRICS),
        *_aggregates("size_imbalance", ("mean", "max")),
        *_aggregates("max_rank_dur (us)", ("mean", "max")),
        *_aggregates("skew in start time", ("mean", "max")),
        *_aggregates("skew in end time", ("mean", "max")),
    ]
    return f"""
    with detail as ({nccl_all2allv_sql()})
    select "Process Group Name", dtype, {", ".join(aggregates)}, count(*) as count,
        any_value("Process Group Ranks") as "Process Group Ranks", any_value("Collective name") as "Collective name",
        any_value("Group size") as "Group size", sum("wall_time (us)") / 1000 as "Total wall_time (ms)"
    from detail
    group by 1, 2
    order by "Total wall_time (ms)" desc, 1, 2
    """


def _job_marts(db: duckdb.DuckDBPyConnection, job_id: str) -> duckdb.DuckDBPyConnection:
    """An in-memory database holding the job's rows of the marts the CSVs read: the marts are views
    over each other, so each is computed once here instead of once per CSV."""
    memory = duckdb.connect()
    for mart in JOB_MARTS:
        memory.register(mart, db.sql(f"select * from {mart} where job_id = $job_id",
                                     params={"job_id": job_id}).to_arrow_table())
    return memory


def write_collective_csvs(db: duckdb.DuckDBPyConnection, job_id: str, folder: Path) -> list[Path]:
    """Write the job's TraceLens-compatible collective CSVs into `folder` (made if missing) and
    return their paths. The all-to-all-v pair is written only when the job has all_to_allv
    instances (TraceLens skips the sheets then too)."""
    ranks = _job_ranks(db, job_id)
    if not ranks:
        raise TraceLakeError(f"no job named {job_id!r} in the warehouse (job_ranks has none of its ranks)")
    folder.mkdir(parents=True, exist_ok=True)
    db = _job_marts(db, job_id)
    implicit_sync = _query(db, nccl_implicit_sync_sql(ranks), job_id)
    with_bandwidth = implicit_sync.num_rows > 0 and implicit_sync.column("algo bw (GB/s)").null_count < implicit_sync.num_rows
    tables = {
        "nccl_summary_implicit_sync.csv": _query(db, nccl_summary_implicit_sync_sql(ranks, with_bandwidth), job_id),
        "nccl_summary_long.csv": _query(db, nccl_summary_long_sql(), job_id),
        "nccl_long.csv": _query(db, nccl_long_sql(), job_id),
        "nccl_implicit_sync.csv": implicit_sync,
        "straggler_summary.csv": _query(db, straggler_summary_sql(), job_id),
    }
    all2allv = _query(db, nccl_all2allv_sql(), job_id)
    if all2allv.num_rows > 0:
        tables["nccl_all2allv.csv"] = all2allv
        tables["nccl_summary_all2allv.csv"] = _query(db, nccl_summary_all2allv_sql(), job_id)
    paths = []
    for name, table in tables.items():
        path = folder / name
        write_csv(table, path)
        paths.append(path)
    return paths
