"""trace_category_kernel_time counts every GPU kernel (issue 28): on the MI300X resnet trace a third
of the communication kernels (24.3 of 71.5 ms) and 7.8 ms of convs, norms and copies have no linked
CPU launch; the category totals, and the dashboard's run totals over them, still hold all of it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import TRACES
from tracelake.lakehouse import open_warehouse

RESNET = TRACES / "mi300" / "resnet_act_checkpoint.json.gz"
KERNEL_TOTALS_SQL = """
select
    (select sum(kernel_time_ms) from trace_category_kernel_time where category = 'collectives') as collectives_ms,
    (select sum(dur_us) / 1000.0 from kernels where is_comm) as comm_kernels_ms,
    (select sum(dur_us) / 1000.0 from kernels where is_comm and is_linked) as linked_comm_kernels_ms,
    (select sum(kernel_time_ms) from trace_category_kernel_time) as category_total_ms,
    (select sum(dur_us) / 1000.0 from kernels) as kernel_total_ms,
    (select sum(dur_us) / 1000.0 from kernels where not is_linked and not is_comm) as unlinked_compute_ms,
    (select sum(kernel_time_ms) from run_groups) as run_total_ms
"""
KERNEL_CATEGORY_SQL = """
select category, kernel_time_ms from trace_category_kernel_time
where category in ('CONV', 'NORM', 'memcpy', 'memset')
order by category
"""
FLOAT_MS = 1e-6  # summed in another order


@pytest.fixture(scope="module")
def resnet(built_once: Callable[[Path], Path]) -> dict[str, float]:
    con = open_warehouse(built_once(RESNET)).connect_read_only()
    try:
        row = con.execute(KERNEL_TOTALS_SQL).fetchone()
        assert row is not None and con.description is not None
        totals = dict(zip([d[0] for d in con.description], row, strict=True))
        totals.update({f"kernel category {c}": ms for c, ms in con.execute(KERNEL_CATEGORY_SQL).fetchall()})
    finally:
        con.close()
    return totals


def test_collectives_hold_every_communication_kernel_linked_or_not(resnet: dict[str, float]) -> None:
    assert resnet["collectives_ms"] == pytest.approx(resnet["comm_kernels_ms"], abs=FLOAT_MS)
    assert resnet["collectives_ms"] == pytest.approx(71.5, abs=0.05)
    assert resnet["collectives_ms"] - resnet["linked_comm_kernels_ms"] == pytest.approx(24.3, abs=0.05)


def test_the_category_totals_add_up_to_the_trace_kernel_time(resnet: dict[str, float]) -> None:
    assert resnet["category_total_ms"] == pytest.approx(resnet["kernel_total_ms"], abs=FLOAT_MS)
    assert resnet["run_total_ms"] == pytest.approx(resnet["kernel_total_ms"], abs=FLOAT_MS)  # the dashboard's


def test_unlinked_compute_kernels_take_their_kernel_category(resnet: dict[str, float]) -> None:
    assert resnet["unlinked_compute_ms"] == pytest.approx(7.85, abs=0.05)
    # no op launched them, so no op category: the conv and norm kernels stand apart from CONV_fwd / NORM_bwd
    assert resnet["kernel category CONV"] == pytest.approx(3.38, abs=0.01)
    assert resnet["kernel category NORM"] == pytest.approx(2.14, abs=0.01)
    assert resnet["kernel category memcpy"] == pytest.approx(0.91, abs=0.01)
    assert resnet["kernel category memset"] == pytest.approx(0.44, abs=0.01)
