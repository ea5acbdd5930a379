"""docs/walkthrough.md runs: its Python blocks, in order, as one script on the two sampled HTA ranks,
and what they compute is what HTA measured on these files (../shared/traces/hta/README.md)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import HTA_TRACES
from tracelake.analyzers.contracts import PriorityData

WALKTHROUGH = Path(__file__).parents[2] / "docs" / "walkthrough.md"
# what the test reads back from the walkthrough's variables
REPORT = """
import json as _json
print(_json.dumps({
    "idle_percent": [round(v, 2) for v in breakdown["idle_time_percent"]],
    "overlap_percent": [round(v, 2) for v in overlap["comm_comp_overlap_percent"]],
    "idle_categories": sorted(set(idle.frame["idle_category"])),
    "top_kernel": top_kernel["kernel_name"],
    "top_kernel_us": top_kernel["kernel_duration_sum_us"],
    "launch_rows": launches.height,
    "slow_launches": slow_launches.height,
    "analysis_dir": str(analysis.out_dir),
}))
"""


def test_the_walkthrough_runs_and_answers_with_htas_numbers(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", WALKTHROUGH.read_text(), flags=re.DOTALL)
    assert len(blocks) == 7  # setup, five questions, the report
    script = tmp_path / "walkthrough.py"
    script.write_text("\n".join(blocks) + REPORT)
    env = {**os.environ, "DO_NOT_TRACK": "1", "MPLBACKEND": "Agg", "WALKTHROUGH_WAREHOUSE": str(tmp_path / "wh"),
           "WALKTHROUGH_TRACES": str(HTA_TRACES), "WALKTHROUGH_OUT": str(tmp_path / "report")}
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["idle_percent"] == [55.21, 52.89]  # HTA's temporal breakdown, both ranks
    assert seen["overlap_percent"] == [14.95, 19.93]  # HTA's get_comm_comp_overlap
    assert seen["idle_categories"] == ["host_wait", "kernel_wait", "other"]
    assert "nccl" in seen["top_kernel"].lower()  # a communication-bound step
    assert seen["launch_rows"] == 1204  # every GPU op of rank 0 has its launch (by correlation: no flows)
    assert 0 < seen["slow_launches"] < seen["launch_rows"]
    priority = PriorityData.model_validate_json((Path(seen["analysis_dir"]) / "priority_data.json").read_text())
    assert priority.findings and (Path(seen["analysis_dir"]) / "perf_report_csvs" / "gpu_timeline.csv").exists()
