"""The marts the compute agents read (compute_ops, op_signature_kernels, compute_claimable_kernels):
their dbt unit tests (the rules with edge cases: the bound in words, the library of most kernel
time, layout kernels, which GPU events a compute finding may claim) and their data tests, run by
dbt on a copy of the session warehouse; and on the real traces, that they add up to op_perf and
op_perf_kernels."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from tracelake.dbt_runner import run_dbt
from tracelake.warehouse import Warehouse

COMPUTE_MARTS = "compute_ops op_signature_kernels compute_claimable_kernels"


def test_dbt_unit_and_data_tests_of_the_compute_marts_pass(warehouse: Warehouse, tmp_path: Path) -> None:
    copy = tmp_path / "warehouse.duckdb"
    shutil.copyfile(warehouse.db_path, copy)
    result = run_dbt(copy, tmp_path / "dbt", ["test", "--select", COMPUTE_MARTS])
    statuses = {str(r.node.name): str(getattr(r.status, "value", r.status)) for r in result.results}
    unit_tests = [name for name in statuses if not name.startswith(("not_null", "unique", "relationships", "accepted"))]
    assert len(unit_tests) == 3, statuses
    assert set(statuses.values()) == {"pass"}, statuses


def test_compute_ops_is_op_perf_with_its_kernel_counts(db: duckdb.DuckDBPyConnection) -> None:
    rows, missing, wrong_count, no_library = db.execute("""
        with kernel_counts as (
            select signature_key, count(*) as kernel_count from op_perf_kernels group by signature_key
        )
        select count(*), count(*) filter (where op_perf.signature_key is null),
            count(*) filter (where compute_ops.kernel_count <> coalesce(kernel_counts.kernel_count, 0)),
            count(*) filter (where compute_ops.library is null)
        from compute_ops
        left join op_perf on op_perf.signature_key = compute_ops.signature_key
        left join kernel_counts on kernel_counts.signature_key = compute_ops.signature_key
    """).fetchone()
    assert rows == db.execute("select count(*) from op_perf").fetchone()[0] > 0
    assert (missing, wrong_count, no_library) == (0, 0, 0)


def test_op_signature_kernels_add_up_to_op_perf_kernels(db: duckdb.DuckDBPyConnection) -> None:
    grouped = db.execute("select sum(kernel_count), sum(time_us) from op_signature_kernels").fetchone()
    events = db.execute("select count(*), sum(dur_us) from op_perf_kernels").fetchone()
    assert grouped[0] == events[0] > 0
    assert grouped[1] == pytest.approx(events[1], rel=1e-9)


def test_claimable_kernels_are_the_compute_kernels_of_op_perf_kernels(db: duckdb.DuckDBPyConnection) -> None:
    claimable = db.execute("select count(*) from compute_claimable_kernels").fetchone()[0]
    system = db.execute("""
        select count(*) from compute_claimable_kernels where kernel_category in ('memcpy', 'memset')
    """).fetchone()[0]
    compute = db.execute("""
        select count(*) from op_perf_kernels
        where kernel_category is not null and kernel_category not in ('memcpy', 'memset')
    """).fetchone()[0]
    assert system == 0
    assert claimable == compute > 0
