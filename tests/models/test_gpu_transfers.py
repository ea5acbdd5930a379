"""gpu_transfers and gpu_event_exposure on the real traces: directions and host memory as the
profiler names them, bandwidth as the profiler computed it, exposed time equal to a brute-force
overlap, and per-event exposure adding up to gpu_timeline (and TraceLens' reference)."""

from __future__ import annotations

import csv

import duckdb
import pytest

from tests.conftest import EXPECTED, EXPECTED_TRACES, trace_id_of

B200_EAGER = "b200/eager_trace.json.gz"
RESNET = "mi300/resnet_act_checkpoint.json.gz"
SGLANG = "inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz"


def test_directions_and_host_memory_follow_the_event_names(db: duckdb.DuckDBPyConnection) -> None:
    b200 = dict(((d, m), (n, b)) for d, m, n, b in db.execute(
        "select direction, host_memory, count(*), sum(bytes) from gpu_transfers where trace_id = ? group by all",
        [trace_id_of(db, B200_EAGER)]).fetchall())
    assert b200 == {("DtoD", None): (146, 771323904), ("HtoD", "pinned"): (13, 33093), ("HtoD", "pageable"): (2, 16)}
    # ROCm names say `Memcpy DtoD (Device -> Device)` / only args.kind; the directions agree with both
    mismatched = db.execute("""
        select count(*) from gpu_transfers t join staging.stg_trace__gpu_ops g using (trace_id, event_idx)
        where t.transfer_kind = 'memcpy' and g.kind is not null and g.kind <> t.direction
    """).fetchone()[0]
    assert mismatched == 0
    sglang = db.execute("select direction, launch_name from gpu_transfers where trace_id = ? order by event_idx",
                        [trace_id_of(db, SGLANG)]).fetchall()
    assert sorted(sglang) == [("DtoD", "hipMemcpyAsync"), ("DtoD", "hipMemcpyAsync"), ("DtoH", "hipMemcpyWithStream")]


def test_every_memcpy_and_memset_is_one_row(db: duckdb.DuckDBPyConnection) -> None:
    expected = db.execute("select count(*) from kernels where category in ('gpu_memcpy', 'gpu_memset') "
                          "or gpu_bucket = 'memcpy'").fetchone()[0]
    assert db.execute("select count(*) from gpu_transfers").fetchone()[0] == expected > 1000
    assert db.execute("select count(*) from gpu_transfers where transfer_kind = 'memset' and direction <> 'memset' "
                      "or transfer_kind = 'memcpy' and direction is null").fetchone()[0] == 0


def test_achieved_bandwidth_equals_the_profilers_own(db: duckdb.DuckDBPyConnection) -> None:
    """CUPTI/roctracer write `memory bandwidth (GB/s)` from the unrounded duration; ours comes from
    the ns-rounded `dur`, so they agree to within one nanosecond of duration."""
    rows = db.execute("""
        select t.achieved_gb_per_s, try_cast(json_extract(e.args, '$."memory bandwidth (GB/s)"') as double), t.dur_us
        from gpu_transfers t join events e using (trace_id, event_idx)
        where json_extract(e.args, '$."memory bandwidth (GB/s)"') is not null
    """).fetchall()
    assert len(rows) > 700
    for ours, profiler, dur_us in rows:
        assert ours == pytest.approx(profiler, rel=1.001e-3 / dur_us, abs=1e-12)


# Reference: the overlap of each linked copy with every computation or communication kernel's
# merged interval, by a plain range join.
EXPOSED_SQL = """
with cover as (
    select trace_id, merged_start_us, merged_end_us from intermediate.int_gpu_intervals_merged
    where event_scope = 'linked' and interval_set = 'compute_or_comm'
),
copy_overlaps as (
    select t.trace_id, t.event_idx, t.dur_us, t.exposed_us,
        coalesce(sum(least(t.end_us, cover.merged_end_us) - greatest(t.ts_us, cover.merged_start_us))
                 filter (where cover.trace_id is not null), 0) as covered_us  -- least/greatest skip nulls
    from gpu_transfers t
    left join cover on cover.trace_id = t.trace_id
     and cover.merged_start_us < t.end_us and cover.merged_end_us > t.ts_us
    where t.transfer_kind = 'memcpy'
    group by all
)
select count(*), max(abs(exposed_us - greatest(dur_us - covered_us, 0))), sum(exposed_us), sum(dur_us) from copy_overlaps
"""


def test_exposed_copy_time_equals_a_brute_force_overlap(db: duckdb.DuckDBPyConnection) -> None:
    count, worst, exposed_us, dur_us = db.execute(EXPOSED_SQL).fetchone()
    assert count > 700 and worst < 1e-3
    assert 0 < exposed_us < dur_us  # some copies hide under kernels, not all
    assert db.execute("select count(*) from gpu_transfers where transfer_kind = 'memset' and exposed_us is not null"
                      ).fetchone()[0] == 0


def _reference_ms(folder: str) -> dict[str, float]:
    with (EXPECTED / folder / "gpu_timeline.csv").open() as handle:
        return {row["type"]: float(row["time ms"]) for row in csv.DictReader(handle)}


@pytest.mark.parametrize("folder", sorted(EXPECTED_TRACES))
def test_event_exposure_adds_up_to_the_reference_timeline(db: duckdb.DuckDBPyConnection, folder: str) -> None:
    trace_id = trace_id_of(db, EXPECTED_TRACES[folder])
    sums = dict(zip(
        ["computation_time", "total_comm_time", "exposed_comm_time", "total_memcpy_time", "exposed_memcpy_time"],
        db.execute("""
            select coalesce(sum(exclusive_us) filter (where gpu_bucket = 'computation'), 0) / 1000,
                   coalesce(sum(exclusive_us) filter (where gpu_bucket = 'communication'), 0) / 1000,
                   coalesce(sum(exposed_us) filter (where gpu_bucket = 'communication'), 0) / 1000,
                   coalesce(sum(exclusive_us) filter (where gpu_bucket = 'memcpy'), 0) / 1000,
                   coalesce(sum(exposed_us) filter (where gpu_bucket = 'memcpy'), 0) / 1000
            from gpu_event_exposure where trace_id = ?""", [trace_id]).fetchone()))
    reference = _reference_ms(folder)
    for name, ours in sums.items():
        assert ours == pytest.approx(reference[name], rel=1e-6, abs=1e-6), name


def test_event_exposure_parts_are_nested(db: duckdb.DuckDBPyConnection) -> None:
    # end_us = ts_us + dur_us on a 1e9-µs clock: lengths carry ~1e-3 µs of float rounding
    bad, linked, rows = db.execute("""
        select count(*) filter (where not (exposed_us >= 0 and exposed_us <= exclusive_us + 1e-3
                                           and exclusive_us >= 0 and exclusive_us <= dur_us + 1e-3
                                           and abs(exclusive_us - hidden_us - exposed_us) < 1e-6)
                                or (gpu_bucket = 'computation' and hidden_us <> 0)),
               (select count(*) from kernels where is_linked), count(*)
        from gpu_event_exposure
    """).fetchone()
    assert bad == 0 and rows == linked
    # ResNet's collectives run on their own stream: most of their time is exposed, but not all
    comm = db.execute("select count(*), sum(exposed_us) / sum(exclusive_us) from gpu_event_exposure "
                      "where trace_id = ? and gpu_bucket = 'communication'", [trace_id_of(db, RESNET)]).fetchone()
    assert comm[0] > 0 and 0.5 < comm[1] < 1.0
