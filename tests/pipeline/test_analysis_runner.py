"""The runner of the declared analysis steps: outputs by name, background steps, their timing."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracelake.analysis_runner import AnalysisRunner, Step, check_wiring
from tracelake.pipeline import ANALYSIS_STEPS, RUN_INPUTS
from tracelake.run_contracts import RunMetadata


def _runner(tmp_path: Path, stages: list[str]) -> AnalysisRunner:
    metadata = RunMetadata(tracelake_version="test", trace_path="t.json", out_dir=str(tmp_path),
                           warehouse=str(tmp_path / "wh"), started_at=datetime.now(UTC))
    return AnalysisRunner(metadata, tmp_path, stages.append)


def test_steps_read_earlier_outputs_by_name_and_wait_for_background_ones(tmp_path: Path) -> None:
    released = threading.Event()
    seen: list[str] = []

    def slow(number: int) -> int:
        released.wait(10)
        seen.append("slow")
        return number * 2

    def quick(number: int) -> int:
        seen.append("quick")
        released.set()  # the background step can finish only once this one ran beside it
        return number + 1

    def total(doubled: int, incremented: int) -> int:
        return doubled + incremented

    steps = (
        Step("doubling", slow, ("number",), "doubled", background=True),
        Step("incrementing", quick, ("number",), "incremented", label="adding one"),
        Step("adding", total, ("doubled", "incremented"), "total", label="adding up"),
    )
    stages: list[str] = []
    runner = _runner(tmp_path, stages)
    try:
        done = runner.run(steps, {"number": 20})
    finally:
        runner.close()
    assert done["total"] == 61 and seen == ["quick", "slow"]
    assert stages == ["adding one", "doubling", "adding up"]  # the wait for a background step is shown
    assert sorted(s.step for s in runner.metadata.steps) == ["adding", "doubling", "incrementing"]


def test_a_step_waits_for_what_it_runs_after(tmp_path: Path) -> None:
    order: list[str] = []

    def background() -> str:
        order.append("background")
        return "done"

    def later() -> None:
        order.append("later")

    runner = _runner(tmp_path, [])
    try:
        runner.run((Step("first", background, (), "first", background=True),
                    Step("second", later, (), after=("first",))), {})
    finally:
        runner.close()
    assert order == ["background", "later"]


def test_a_step_names_its_function_parameters() -> None:
    def step_function(facts: object, runner: object) -> None:
        return None

    with pytest.raises(ValueError, match="are not the parameters"):
        Step("misnamed", step_function, ("runner", "facts"))


def test_the_analysis_reads_only_what_earlier_steps_write() -> None:
    check_wiring(ANALYSIS_STEPS, RUN_INPUTS)
    with pytest.raises(ValueError, match="reads db"):
        check_wiring(ANALYSIS_STEPS[2:], RUN_INPUTS)
    assert [s.name for s in ANALYSIS_STEPS][:3] == ["ingest", "open warehouse", "trace facts"]
