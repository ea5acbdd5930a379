"""The job report: analysis.md (templates/job_analysis.md.j2) and its HTML, from the job marts and
the job's ranked findings. The renderer arranges what the queries returned; every number in the
tables is a column of a query printed under "How to reproduce" (analyzers/job_queries.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import settings
from tracelake.analyzers.contracts import PriorityData
from tracelake.analyzers.job_agents import job_context
from tracelake.analyzers.job_collectives import signature_sql, signatures
from tracelake.analyzers.job_common import JobContext, inline, rows
from tracelake.analyzers.job_queries import BREAKDOWN_SPREAD_SQL, BREAKDOWN_SQL, JOB_SQL, RANK_LEADS_SQL
from tracelake.analyzers.job_straggler import straggler_row
from tracelake.core.markdown_text import TraceStrings, one_line
from tracelake.core.templates import markdown_environment
from tracelake.core.text_format import bytes_text
from tracelake.reports.analysis_format import cell, fmt_ms, fmt_pct
from tracelake.reports.analysis_html import render_analysis_html

TEMPLATES = Path(__file__).parent / "templates"
TEMPLATE = "job_analysis.md.j2"
_environment = markdown_environment(TEMPLATES)
_environment.filters.update(ms=fmt_ms, pct=fmt_pct, cell=cell, one_line=one_line, size=bytes_text)


class JobReportInputs(BaseModel):
    """What the job report prints, gathered by job_report_inputs."""

    job: JobContext
    straggler_rank: int | None
    breakdown: list[dict[str, Any]]  # BREAKDOWN_SQL rows, times in us
    spread: list[dict[str, Any]]  # BREAKDOWN_SPREAD_SQL rows: statistic, then the columns
    signatures: list[dict[str, Any]]  # job_collectives.signatures
    priority: PriorityData
    rank_links: list[dict[str, Any]]  # rank, link (relative to the report), present
    rank_leads: list[dict[str, Any]]  # RANK_LEADS_SQL rows: each rank's own P1
    reproduce: list[tuple[str, str]]  # (label, sql)
    problems: list[str]


def _rank_links(ctx: JobContext, breakdown: list[dict[str, Any]], rank_reports: dict[int, Path],
                out_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    links, problems = [], []
    for rank in sorted({int(r["rank"]) for r in breakdown} | set(rank_reports)):
        report = rank_reports.get(rank)
        if report is None:
            problems.append(f"rank {rank} of job {ctx.job_id} has no report to link")
        links.append({"rank": rank, "link": None if report is None else Path(os.path.relpath(report, out_dir)).as_posix()})
    return links, problems


def rank_leads(db: duckdb.DuckDBPyConnection, job_id: str) -> list[dict[str, Any]]:
    """Each rank's own P1 (RANK_LEADS_SQL); none before any rank was analyzed (no `findings` table)."""
    if not rows(db, "select 1 from information_schema.tables where table_name = 'findings'"):
        return []
    return rows(db, inline(RANK_LEADS_SQL, job_id))


def job_report_inputs(db: duckdb.DuckDBPyConnection, job_id: str, priority: PriorityData,
                      rank_reports: dict[int, Path], out_dir: Path) -> JobReportInputs:
    """The job's header, per-rank breakdown and spread, collective signatures and findings."""
    ctx = job_context(db, job_id)
    straggler = straggler_row(db, job_id)
    breakdown = rows(db, inline(BREAKDOWN_SQL, job_id))
    links, problems = _rank_links(ctx, breakdown, rank_reports, out_dir)
    reproduce = [("The job", inline(JOB_SQL, job_id)), ("Time breakdown per rank", inline(BREAKDOWN_SQL, job_id)),
                 ("Spread over the ranks", inline(BREAKDOWN_SPREAD_SQL, job_id)),
                 ("Collectives by signature", signature_sql(job_id)),
                 ("Each rank's own P1", inline(RANK_LEADS_SQL, job_id))]
    return JobReportInputs(
        job=ctx, straggler_rank=None if straggler is None else int(straggler["rank"]), breakdown=breakdown,
        spread=rows(db, inline(BREAKDOWN_SPREAD_SQL, job_id)), signatures=signatures(db, job_id),
        priority=priority, rank_links=links, rank_leads=rank_leads(db, job_id), reproduce=reproduce, problems=problems)


def rank_ranges(ranks: list[int]) -> str:
    """Ranks as sorted ranges: [1, 2, 3, 5] -> "1-3, 5" (126 missing ranks of 128 in one line)."""
    ordered = sorted(set(ranks))
    starts = [r for i, r in enumerate(ordered) if i == 0 or ordered[i - 1] != r - 1]
    ends = [r for i, r in enumerate(ordered) if i == len(ordered) - 1 or ordered[i + 1] != r + 1]
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in zip(starts, ends, strict=True))


def _cards(inputs: JobReportInputs) -> list[dict[str, Any]]:
    step = inputs.priority.e2e_time_ms
    cards = []
    for f in sorted(inputs.priority.findings, key=lambda f: f.global_rank):
        strings = TraceStrings.of(f.evidence, f.operations)
        cards.append({
            "rank": f.global_rank, "title": strings.escape_in(one_line(f.title)),
            "insight": strings.escape_in(f.insight), "action": strings.escape_in(f.action),
            "details": strings.escape_in(f.details), "sql": f.evidence_sql.strip(),
            "recoverable_ms": f.recoverable_ms, "share": f.impact_score, "method": f.estimate_method,
            "confidence": f.confidence, "agent": f.agent, "step_ms": step})
    return cards


def _summary(inputs: JobReportInputs, cards: list[dict[str, Any]]) -> dict[str, Any]:
    """The biggest real win (the first estimated finding) and the rest of the estimated ones."""
    estimated = [c for c in cards if c["recoverable_ms"] is not None]
    lead = estimated[0] if estimated and (estimated[0]["share"] or 0.0) >= settings.MIN_PITEM_IMPACT_SCORE else None
    return {"lead": lead, "others": estimated[1:] if lead else estimated,
            "unestimated": [c for c in cards if c["recoverable_ms"] is None]}


def render_job_markdown(inputs: JobReportInputs) -> str:
    """analysis.md of the job."""
    cards = _cards(inputs)
    text = _environment.get_template(TEMPLATE).render(
        job=inputs.job, straggler_rank=inputs.straggler_rank, breakdown=inputs.breakdown, spread=inputs.spread,
        signatures=inputs.signatures, cards=cards, summary=_summary(inputs, cards), rank_links=inputs.rank_links,
        rank_leads=inputs.rank_leads,
        reproduce=inputs.reproduce, problems=inputs.problems, settings=settings,
        missing=rank_ranges(inputs.job.missing_ranks))
    return "\n".join(line.rstrip() for line in text.splitlines()).replace("\n\n\n", "\n\n").rstrip("\n") + "\n"


def render_job_html(markdown: str, job_id: str) -> str:
    """analysis.html of the job: its markdown for a browser; the links to each rank's analysis.md
    point at that rank's analysis.html."""
    return render_analysis_html(markdown, f"{job_id}: TraceLake job analysis").replace(
        "/analysis.md\"", "/analysis.html\"")
