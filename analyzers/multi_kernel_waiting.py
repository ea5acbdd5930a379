"""A rank of a job whose collective time is mostly waiting for a late rank (issue 24 item 4).

Its exposed collectives are not communication that overlap would hide: the kernels spin until the
last rank arrives (collective_calls.wait_us). When that wait is at least
settings.COLLECTIVE_WAIT_SHARE_MIN of the rank's collective kernel time, the multi-kernel agent
says so instead of advising overlap: the wait, the ranks it waits for, whether this rank is itself
the job's straggler, and the job report that says why (analyzers/advice/multi_kernel.toml
`waiting_for_rank`). The time is the job's straggler finding's (the job report), so this finding
carries no estimate and claims no GPU event.
"""

from __future__ import annotations

from typing import Any

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import settings
from tracelake.analyzers.contracts import AdviceText, Finding
from tracelake.analyzers.finding_text import render_part
from tracelake.analyzers.job_straggler import straggler_row
from tracelake.core.sql_text import inline_trace_id

JOB_REPORT_LINK = "../../analysis.md"  # a rank's report is <job out>/ranks/rank<r>/analysis.md (docs/jobs.md)

# This trace's collectives in its job: its waits, the ranks it waited for, how often it was last.
WAITING_SQL = """
with params as (select ?::varchar as trace_id),
calls as (
    select c.job_id, c.rank, c.instance_id, c.wait_us, c.dur_us, i.last_arrival_rank
    from collective_calls as c
    cross join params
    inner join collective_instances as i on i.job_id = c.job_id and i.instance_id = c.instance_id
    where c.trace_id = params.trace_id and not i.is_desync
        and (i.collective_kind = 'implicit_sync' or (i.match_method = 'stream_ordinal' and i.collective_name = 'unknown'))
),
late as (
    select last_arrival_rank as rank, sum(wait_us) as wait_us, count(*) as collectives
    from calls
    where wait_us > 0 and last_arrival_rank <> rank
    group by last_arrival_rank
)
select any_value(job_id) as job_id, any_value(rank) as rank, count(*) as collectives,
    sum(wait_us) as wait_us, sum(dur_us) as collective_us,
    count(*) filter (where last_arrival_rank = rank) as times_last,
    (select list(struct_pack(rank := late.rank, wait_us := late.wait_us, collectives := late.collectives)
        order by late.wait_us desc, late.rank) from late) as waited_for
from calls
having count(*) > 0"""


class CollectiveWaiting(BaseModel):
    """One rank's waiting at its job's collectives."""

    job_id: str
    rank: int
    collectives: int
    wait_ms: float
    collective_ms: float
    times_last: int
    waited_for: list[dict[str, Any]]  # rank, wait_ms, collectives: the ranks it waited for, most first
    job_straggler: int | None  # the job's straggler rank (job_straggler), if one is named

    @property
    def share(self) -> float:
        return self.wait_ms / self.collective_ms if self.collective_ms > 0 else 0.0

    @property
    def mostly_waiting(self) -> bool:
        return self.share >= settings.COLLECTIVE_WAIT_SHARE_MIN


def collective_waiting(db: duckdb.DuckDBPyConnection, trace_id: str) -> CollectiveWaiting | None:
    """The trace's waiting at its job's collectives; None when it is no rank of a job with collectives."""
    row = db.execute(WAITING_SQL, [trace_id]).fetchone()
    if row is None or row[0] is None:
        return None
    job_id, rank, collectives, wait_us, collective_us, times_last, waited_for = row
    straggler = straggler_row(db, str(job_id))
    return CollectiveWaiting(
        job_id=str(job_id), rank=int(rank), collectives=int(collectives), wait_ms=float(wait_us or 0) / 1000.0,
        collective_ms=float(collective_us or 0) / 1000.0, times_last=int(times_last),
        waited_for=[{"rank": int(w["rank"]), "wait_ms": float(w["wait_us"]) / 1000.0,
                     "collectives": int(w["collectives"])} for w in waited_for or []],
        job_straggler=None if straggler is None else int(straggler["rank"]))


def waiting_finding(waiting: CollectiveWaiting, agent: str, trace_id: str, exposed_ms: float) -> Finding:
    """The multi-kernel finding of a rank whose collectives mostly wait: no overlap advice."""
    values = {**waiting.model_dump(), "share": 100.0 * waiting.share, "exposed_ms": exposed_ms,
              "job_report": JOB_REPORT_LINK, "is_straggler": waiting.job_straggler == waiting.rank}
    text = AdviceText(agent="multi_kernel", fact="waiting_for_rank", values=values)
    return Finding(
        finding_id=f"{agent}:comm-waiting", agent=agent, tier="system", category=agent,
        title=render_part(text, "title").strip(), insight=render_part(text, "insight").strip(),
        action=render_part(text, "action").strip(), details=render_part(text, "details").strip(),
        estimate_method="qualitative", confidence="high",
        evidence={"wait_ms": waiting.wait_ms, "collective_ms": waiting.collective_ms, "job_id": waiting.job_id,
                  "rank": waiting.rank, "times_last": waiting.times_last, "job_straggler": waiting.job_straggler,
                  "waited_for": waiting.waited_for},
        evidence_sql=inline_trace_id(WAITING_SQL, trace_id))
