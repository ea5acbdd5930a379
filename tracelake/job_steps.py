"""The job pipeline's finding and report steps (tracelake/job_pipeline.py lists them): run the job
analyzers over the job marts, rank their findings by recoverable time, write the job report
(analysis.md, analysis.html, priority_data.json) that links to each rank's report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb

from tracelake.analyzers.contracts import Finding, PriorityData, RankedFinding
from tracelake.analyzers.job_agents import job_context, run_job_analyzers
from tracelake.reports.job_report import JobReportInputs, job_report_inputs, render_job_html, render_job_markdown
from tracelake.reports.priority import rank_order

__all__ = ["rank_job_findings", "run_job_agents", "write_job_report"]


def run_job_agents(db: duckdb.DuckDBPyConnection, job_id: str) -> list[Finding]:
    """Every job analyzer's findings (straggler and why it is late, collective bounds, all-to-all
    imbalance, desync, clock anomaly, exposed transfer), in analyzer order. An analyzer that fails
    on a query is left out; write_job_report lists it under the report's warnings."""
    ctx = job_context(db, job_id)
    return [f for r in run_job_analyzers(db, ctx) if r.status == "OK" for f in r.findings]


def rank_job_findings(db: duckdb.DuckDBPyConnection, job_id: str, findings: Sequence[Finding]) -> PriorityData:
    """The job's findings ranked as a trace's are (reports/priority.py rank_order: by recoverable
    time, heuristic never above a larger quantified one, unestimated last), P1 first; impacts are %
    of the job's step time."""
    ctx = job_context(db, job_id)
    scored = [f for f in rank_order(list(findings)) if f.impact_score is not None]
    unscored = [f for f in findings if f.impact_score is None]  # in analyzer order: why-late after its straggler
    ranked = [RankedFinding(**f.model_dump(exclude={"global_rank"}), global_rank=rank)
              for rank, f in enumerate(scored + unscored, start=1)]
    return PriorityData(trace_id=job_id, comparison_scope="job", e2e_time_ms=ctx.job_step_ms, findings=ranked,
                        priorities=[])


def write_job_report(db: duckdb.DuckDBPyConnection, job_id: str, findings: Sequence[Finding],
                     rank_reports: dict[int, Path], out_dir: Path) -> list[str]:
    """`out_dir`/analysis.md, analysis.html and priority_data.json of the job; `rank_reports` maps
    each rank to its analysis.md (linked relative to `out_dir`). Returns the report's problems (an
    analyzer that failed, a rank with no report), each one line, for the run's warnings."""
    priority = rank_job_findings(db, job_id, findings)
    inputs: JobReportInputs = job_report_inputs(db, job_id, priority, rank_reports, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown = render_job_markdown(inputs)
    (out_dir / "analysis.md").write_text(markdown, encoding="utf-8")
    (out_dir / "analysis.html").write_text(render_job_html(markdown, job_id), encoding="utf-8")
    (out_dir / "priority_data.json").write_text(priority.model_dump_json(indent=2), encoding="utf-8")
    return inputs.problems
