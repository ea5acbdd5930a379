"""What `tracelake analyze` is asked to do (its command-line options)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tracelake.reports.report_inputs import RankOfJob

# --mode values that write TraceLens' inference perf-report layout (parent_module op summaries,
# `<family>_fwd` sheets); given on the command line, never auto-detected.
INFERENCE_REPORT_MODES = ("inference", "inference-graph")


@dataclass(frozen=True)
class AnalyzeOptions:
    platform: str | None = None
    mode: str = "auto"
    out_dir: Path | None = None
    jobs: int = 1
    xlsx: bool = False
    capture_folder: Path | None = None
    agents: str = "deterministic"
    llm_cmd: str | None = None
    compare: Path | None = None  # comparative scope: trace 2 (the target; `trace` is the baseline)
    platform2: str | None = None
    capture_folder2: Path | None = None
    force: bool = False  # replace a TraceLake report folder that also holds the user's files (kept)
    # a job (tracelake/job_pipeline.py): its name (--job) and --gpus-per-node
    job_name: str | None = None
    gpus_per_node: int | None = None
    # a rank report of a job: its header names the job and links to the job's report ...
    job: RankOfJob | None = None
    # ... and it is built inside the job's staging folder: where it will live once the job's folder
    # is in place (run.json and the warehouse's record of the report name this folder)
    report_home: Path | None = None

    @property
    def inference_layout(self) -> bool:
        """TraceLens' inference layout only on request: an auto-detected inference trace keeps the
        default report, the one TraceLens writes without its inference script."""
        return self.mode in INFERENCE_REPORT_MODES
