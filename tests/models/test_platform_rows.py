"""Every GPU the vendor datasheets cover has a platform row, and each real device name reaches its row.

The device names are the `deviceProperties[].name` strings real traces carry (tests/data, the shared
jobs of /work/shared/traces: V100-SXM2, A100-SXM4-80GB, A100-PG509-200) and the names the CUDA / ROCm
runtimes report for the other parts. Each is written into a copy of the small torch.compile trace of
tests/data and ingested, so the real int_trace_platforms model picks the row.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.conftest import TRACES, run_cli
from tests.reports.trace_variants import write_with_device_name
from tracelake.ingestion import ingest_paths
from tracelake.platforms import SEEDS, load_platforms
from tracelake.warehouse import Warehouse

SOURCE = TRACES / "torch_compile_triton" / "trace.json.gz"

# device name -> the platform it must select (None: matches no row, reported as not detected)
DEVICE_PLATFORMS: dict[str, str | None] = {
    # in tests/data
    "NVIDIA H100 80GB HBM3": "H100",
    "NVIDIA B200": "B200",
    "AMD Instinct MI300X": "MI300X",
    "AMD Instinct MI300X VF": "MI300X",
    "AMD Instinct MI210": "MI210",
    # in the shared jobs (/work/shared/traces/jobs)
    "Tesla V100-SXM2-32GB": "V100_SXM2",
    "NVIDIA A100-SXM4-80GB": "A100",
    "NVIDIA A100-PG509-200": "A100_SXM4_40GB",
    # as the runtimes name the other parts
    "Tesla V100-SXM2-16GB": "V100_SXM2",
    "Tesla V100-PCIE-32GB": "V100_PCIE",
    "Tesla V100-PCIE-16GB": "V100_PCIE",
    "NVIDIA A100-SXM4-40GB": "A100_SXM4_40GB",
    "NVIDIA A100-PCIE-40GB": "A100_PCIE_40GB",
    "NVIDIA A100 80GB PCIe": "A100_PCIE_80GB",
    "NVIDIA A10": "A10",
    "NVIDIA A30": "A30",
    "NVIDIA A40": "A40",
    "NVIDIA L4": "L4",
    "NVIDIA L40S": "L40S",
    "NVIDIA H100 PCIe": "H100_PCIE",
    "NVIDIA H100 NVL": "H100_NVL",
    "NVIDIA H200": "H200",
    "NVIDIA H200 NVL": "H200_NVL",
    "NVIDIA H20": "H20",
    "NVIDIA GH200 480GB": "GH200",
    "NVIDIA GB200": "GB200",
    "NVIDIA B300 SXM6 AC": "B300",
    "NVIDIA GeForce RTX 4090": "RTX_4090",
    "NVIDIA RTX 6000 Ada Generation": "RTX_6000_ADA",
    "Tesla T4": "T4",
    "AMD Instinct MI100": "MI100",
    "AMD Instinct MI250X": "MI250X",
    "AMD Instinct MI250X / MI250": "MI250X",  # ROCm names both parts so; the larger part's row
    "AMD Instinct MI250": "MI250",
    "AMD Instinct MI300A": "MI300A",
    "AMD Instinct MI325X": "MI325X",
    "AMD Instinct MI355X": "MI355X",
    # no row: never one of the rows above by accident
    "NVIDIA A10G": None,
    "NVIDIA L40": None,
    "Tesla V100S-PCIE-32GB": None,
    "Foo GPU": None,
}


@pytest.fixture(scope="module")
def platform_rows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, bool]]:
    """device name -> (traces.platform, traces.platform_detected) after a real ingest."""
    folder = tmp_path_factory.mktemp("device_names")
    paths = {}
    for index, name in enumerate(DEVICE_PLATFORMS):
        paths[name] = folder / f"device_{index}.json.gz"
        write_with_device_name(SOURCE, paths[name], name)
    wh = Warehouse(tmp_path_factory.mktemp("device_warehouse"))
    report = ingest_paths([folder], wh, tags={"suite": "platforms"}, jobs=2)
    assert not report.failed, report.failed
    with wh.connect_read_only() as con:
        rows = {path: (platform, detected) for path, platform, detected in
                con.execute("select source_path, platform, platform_detected from traces").fetchall()}
    return {name: rows[str(path.resolve())] for name, path in paths.items()}


@pytest.mark.parametrize("device_name", list(DEVICE_PLATFORMS))
def test_each_device_name_selects_its_platform_row(platform_rows: dict[str, tuple[str, bool]],
                                                   device_name: str) -> None:
    platform, detected = platform_rows[device_name]
    expected = DEVICE_PLATFORMS[device_name]
    if expected is None:
        assert not detected  # reported as unknown (trace_quality platform_detected warns), never a match
    else:
        assert (platform, detected) == (expected, True)


def test_every_platform_row_has_peaks_and_a_source() -> None:
    specs = {spec.platform: spec for spec in load_platforms()}
    with (SEEDS / "platforms.csv").open(newline="") as handle:
        priorities = [int(row["detect_priority"]) for row in csv.DictReader(handle)]
    assert len(set(priorities)) == len(priorities)  # the detection order is never a tie
    for platform in set(DEVICE_PLATFORMS.values()) - {None}:
        assert platform in specs
    for spec in specs.values():
        assert spec.source and spec.mem_bw_gbps > 0 and spec.memory_gb > 0, spec.platform
        # every row but the announced MI455X has a published peak to draw a roofline with
        assert spec.peaks_tflops or spec.platform == "MI455X", spec.platform



def test_an_unknown_device_is_reported_as_unknown(tmp_path: Path) -> None:
    """A device name no row matches: platform_source says assumed (never silently), with a warning naming the
    roofline assumed for the trace's runtime (this torch.compile trace ran on ROCm: MI300X)."""
    trace = tmp_path / "foo_gpu.json.gz"
    write_with_device_name(SOURCE, trace, "Foo GPU")
    out = tmp_path / "report"
    result = run_cli("analyze", str(trace), "--warehouse", str(tmp_path / "wh"), "--out", str(out))
    assert result.returncode == 0, result.stderr
    run = json.loads((out / "metadata" / "run.json").read_text())
    assert run["platform_source"] == "assumed"
    assert "roofline assumed MI300X (the default for a ROCm trace), its device 'Foo GPU' is not in the platforms seed" in result.stderr
    assert "(device `Foo GPU` not in the platforms seed)" in (out / "analysis.md").read_text().splitlines()[0]
