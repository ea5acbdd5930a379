"""Each class of the reliability probe (issue 27), at the probe's own sizes, through `tracelake
ingest` in a subprocess under an address-space limit.

Every case must end with exit 0 or 2 (one line on stderr, never a traceback), and its peak RSS
(wait4 of that child) must stay within a bound proportional to the input: the peak of ingesting
the unchanged source trace, plus a fixed slack, plus a few bytes per byte the case adds to the
file. Before issue 27, 20,000 nested ops took 8.3 GB and 100,000 identical ops ran past 4 minutes;
nothing here asserts wall-clock time.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import TRACES
from tests.ingest.probe_cases import PROBE_CLASSES, make_probe_case

SEED = 20261202
MIB = 1 << 20
# Address space of one ingest: DuckDB, Arrow and the decode workers reserve far more than they
# touch (a small trace needs ~1.5 GiB of it); a quadratic case would pass it long before its end.
ADDRESS_SPACE_LIMIT = 3 << 30
# Over the source trace's own peak: DuckDB's buffers and the dbt build vary by tens of MB between
# runs of one trace on a loaded machine.
RSS_SLACK_BYTES = 128 * MIB
# Per byte a case adds to the file: decoded columns, Parquet and DuckDB copies of the added events.
# Measured after the fixes: 100,000 identical ops (36.7 MiB) peak 192 MiB over their source (5 per
# byte); 5,000 nested nn.Module frames (2.4 MiB) 97 MiB over (40 per byte, module chains of 256
# frames). Before them the same 2.4 MiB took 4.2 GB (1,700 per byte), 20,000 nested ops 8.3 GB.
RSS_PER_ADDED_BYTE = 16

CPU_MLP = "cpu_only/cpu_mlp_training.json.gz"
BERT_H100 = "h100/gaunernst_bert-small-uncased__1016001.json.gz"
# (class, size, source): the probe's sizes, except identical ops (3 M in the probe: ~1 GB of JSON
# from this source) and empty events (30 M in the probe), cut so that the file runs in minutes.
CASES = (
    ("nested_ops", 20_000, CPU_MLP),
    ("same_time_ops", 20_000, CPU_MLP),
    ("nested_modules", 5_000, BERT_H100),
    ("identical_ops", 100_000, CPU_MLP),
    ("metadata_storm", 100_000, CPU_MLP),
    ("empty_events", 3_000_000, CPU_MLP),
    ("long_names", 100_000, CPU_MLP),
    ("gzip_bomb", 256 * MIB, CPU_MLP),
    ("gpu_category_variants", 10_000, BERT_H100),
    ("gpu_begin_end", 10_000, BERT_H100),
    ("string_timestamps", 100_000, BERT_H100),
    ("epoch_timestamps", None, BERT_H100),
)


@dataclass(frozen=True)
class Run:
    code: int
    stderr: str
    peak_rss_bytes: int


def _ingest(path: Path, warehouse: Path) -> Run:
    child = subprocess.Popen(
        ["prlimit", f"--as={ADDRESS_SPACE_LIMIT}", str(Path(sys.executable).parent / "tracelake"), "ingest",
         str(path), "--warehouse", str(warehouse), "--quiet", "--jobs", "1"],  # prlimit execs: wait4 sees tracelake
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "DO_NOT_TRACK": "1"},
    )
    assert child.stderr is not None
    stderr = child.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(child.pid, 0)
    return Run(os.waitstatus_to_exitcode(status), stderr, usage.ru_maxrss * 1024)


@pytest.fixture(scope="module")
def source_rss(tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    """Peak RSS of ingesting each unchanged source trace under the same limit."""
    root = tmp_path_factory.mktemp("sources")
    peaks = {}
    for source in {source for _, _, source in CASES}:
        run = _ingest(TRACES / source, root / source.replace("/", "_"))
        assert run.code == 0, run.stderr
        peaks[source] = run.peak_rss_bytes
    return peaks


def test_every_probe_class_is_run() -> None:
    assert {name for name, _, _ in CASES} == set(PROBE_CLASSES)


@pytest.mark.parametrize(("probe_class", "size", "source"), CASES, ids=[name for name, _, _ in CASES])
def test_probe_case_ingests_within_memory_proportional_to_its_input(
    tmp_path: Path, source_rss: dict[str, int], probe_class: str, size: int | None, source: str,
) -> None:
    source_gz = (TRACES / source).read_bytes()
    case = make_probe_case(probe_class, gzip.decompress(source_gz), size, SEED)
    path = tmp_path / f"{case.label}{case.suffix}"
    path.write_bytes(case.data)
    run = _ingest(path, tmp_path / "wh")

    assert run.code in (0, 2), (run.code, run.stderr)
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr, run.stderr
    if run.code == 2:
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tracelake: error:"), run.stderr
    added_bytes = max(0, len(case.data) - len(gzip.decompress(source_gz)))
    bound = source_rss[source] + RSS_SLACK_BYTES + RSS_PER_ADDED_BYTE * added_bytes
    print(f"\n{case.label}: exit {run.code}, {len(case.data) / MIB:.1f} MiB file, peak RSS "
          f"{run.peak_rss_bytes / MIB:.0f} MiB (source {source_rss[source] / MIB:.0f} MiB, bound {bound / MIB:.0f} MiB)")
    assert run.peak_rss_bytes <= bound, (case.label, run.peak_rss_bytes / MIB, bound / MIB)
