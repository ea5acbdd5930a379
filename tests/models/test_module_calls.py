"""module_calls and module_call_events on the real traces: the set-based sweep gives what the direct
definition (a range join of frames around each launch) gives, and the tree reads like the model."""

from __future__ import annotations

import duckdb

from tests.conftest import trace_id_of

QWEN = "h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
RESNET = "mi300/resnet_act_checkpoint.json.gz"

# The innermost frame around each kernel launch, by the definition: frames of the launch's thread
# whose [ts, end) holds its start, the latest-starting one (the narrowest on ties).
INNERMOST_BY_RANGE_JOIN = """
with frames as (
    select trace_id, event_idx, pid, tid, ts_us, end_us from events
    where category = 'python_function' and name like 'nn.Module: %'
),
launches as (
    select kernels.trace_id, kernels.event_idx, events.pid, events.tid, events.ts_us
    from kernels join events on events.trace_id = kernels.trace_id and events.event_idx = kernels.launch_event_idx
    where kernels.is_linked
)
select launches.trace_id, launches.event_idx,
    arg_max(frames.event_idx, [frames.ts_us, -frames.end_us, frames.event_idx]) as module_call_id
from launches
join frames on frames.trace_id = launches.trace_id and frames.pid = launches.pid and frames.tid = launches.tid
  and frames.ts_us <= launches.ts_us and launches.ts_us < frames.end_us
group by all
"""


def test_each_launch_gets_the_innermost_frame_around_it(db: duckdb.DuckDBPyConnection) -> None:
    expected = set(db.execute(INNERMOST_BY_RANGE_JOIN).fetchall())
    got = set(db.execute("""
        select kernels.trace_id, kernels.event_idx, module_call_events.module_call_id
        from kernels join module_call_events
          on module_call_events.trace_id = kernels.trace_id and module_call_events.event_idx = kernels.launch_event_idx
        where kernels.is_linked""").fetchall())
    assert len(expected) > 4000 and got == expected


def test_call_kernel_counts_are_the_kernels_launched_in_the_frame(db: duckdb.DuckDBPyConnection) -> None:
    """kernel_count / kernel_time / first and last kernel of every call, against the frames' intervals."""
    differ = db.execute("""
        with launched as (
            select module_calls.trace_id, module_calls.module_call_id, count(*) as kernel_count,
                sum(kernels.dur_us) as kernel_time_us, min(kernels.ts_us) as first_ts, max(kernels.ts_us) as last_ts
            from module_calls
            join events as launch on launch.trace_id = module_calls.trace_id and launch.pid = module_calls.pid
              and launch.tid = module_calls.tid and launch.ts_us >= module_calls.ts_us and launch.ts_us < module_calls.end_us
            join kernels on kernels.trace_id = launch.trace_id and kernels.launch_event_idx = launch.event_idx
            where kernels.is_linked
            group by all
        )
        select count(*) from module_calls
        left join launched using (trace_id, module_call_id)
        where module_calls.kernel_count <> coalesce(launched.kernel_count, 0)
           or abs(module_calls.kernel_time_us - coalesce(launched.kernel_time_us, 0)) > 1e-6
           or module_calls.first_kernel_ts_us is distinct from launched.first_ts
           or module_calls.last_kernel_ts_us is distinct from launched.last_ts""").fetchone()[0]
    assert differ == 0


def test_qwen_call_tree(db: duckdb.DuckDBPyConnection) -> None:
    trace_id = trace_id_of(db, QWEN)
    rows = db.execute("""
        select module_class, count(distinct module_instance), count(*), min(depth), max(depth)
        from module_calls where trace_id = ? group by 1""", [trace_id]).fetchall()
    by_class = {r[0]: r[1:] for r in rows}
    assert by_class["Qwen2Model"] == (1, 1, 0, 0)
    assert by_class["Qwen2DecoderLayer"] == (24, 24, 1, 1)
    assert by_class["Qwen2RMSNorm"][:2] == (49, 49)  # 2 per layer + the final norm
    assert sum(r[2] for r in rows) == 316  # every nn.Module frame of the trace
    # every layer call hangs under the model call; the model call launches every kernel of its layers
    model_call, model_kernels = db.execute("select module_call_id, kernel_count from module_calls "
                                           "where trace_id = ? and depth = 0", [trace_id]).fetchone()
    layers = db.execute("select count(*), sum(kernel_count) from module_calls where trace_id = ? and "
                        "module_class = 'Qwen2DecoderLayer' and parent_module_call_id = ?", [trace_id, model_call]).fetchone()
    assert layers[0] == 24 and 0 < layers[1] < model_kernels
    chain = db.execute("select module_chain, instance_index from module_calls where trace_id = ? and "
                       "module_instance = 'Qwen2RMSNorm_3'", [trace_id]).fetchone()
    assert chain == (["Qwen2Model", "Qwen2DecoderLayer", "Qwen2RMSNorm"], 3)


def test_activation_checkpoint_recomputes_are_more_calls_of_the_same_instances(db: duckdb.DuckDBPyConnection) -> None:
    trace_id = trace_id_of(db, RESNET)
    instances, calls = db.execute("select count(distinct module_instance), count(*) from module_calls "
                                  "where trace_id = ? and module_class = 'BasicBlock'", [trace_id]).fetchone()
    assert instances == 8 and calls > instances
