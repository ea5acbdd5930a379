"""Run the agents of one tier concurrently: each on its own read-only DuckDB cursor, with a
time limit and one retry; render each result's findings markdown. A failed agent comes back as an ERROR result (and ends up in the
report's Warnings), never as an exception and never silently dropped."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import UTC, datetime

import duckdb

from tracelake.agents.llm import LlmCommand, LlmOutputRejected, run_llm
from tracelake.agents.registry import AgentDefinition
from tracelake.agents.render import render_findings
from tracelake.analyzers.contracts import AgentResult, AnalysisContext
from tracelake.core.markdown_text import safe_markdown

# Fault injection for checking the failure path end to end: names agents that must fail.
FORCE_FAILURE_ENV = "TRACELAKE_FORCE_AGENT_FAILURE"


class ForcedAgentFailure(RuntimeError):
    pass


@dataclass(frozen=True)
class RunnerSettings:
    timeout_seconds: float
    attempts: int
    llm: LlmCommand | None = None


def _now() -> datetime:
    return datetime.now(UTC)


def _forced_failures() -> set[str]:
    return {name.strip() for name in os.environ.get(FORCE_FAILURE_ENV, "").split(",") if name.strip()}


def _analyze(definition: AgentDefinition, cursor: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    if definition.name in _forced_failures():
        raise ForcedAgentFailure(f"forced failure ({FORCE_FAILURE_ENV})")
    return definition.analyze(cursor, ctx)


def _error_result(definition: AgentDefinition, message: str, attempts: int, started: datetime) -> AgentResult:
    return AgentResult(
        agent=definition.name, tier=definition.tier, category=definition.name, status="ERROR",
        error=message, started_at=started, finished_at=_now(), attempts=attempts,
    )


def render(definition: AgentDefinition, result: AgentResult, ctx: AnalysisContext, settings: RunnerSettings,
           warnings: list[str]) -> AgentResult:
    """Render the findings markdown: through the LLM command when configured, else the template.
    An LLM may echo trace names as it likes: its markdown keeps no raw HTML, link or open fence."""
    deterministic = render_findings(definition, result, ctx)
    markdown = deterministic
    if settings.llm is not None and result.status == "OK":
        try:
            markdown = str(safe_markdown(run_llm(settings.llm, definition, result)))
        except LlmOutputRejected as exc:
            warnings.append(f"agent {definition.name}: {exc}; the deterministic findings are used")
    return result.model_copy(update={"findings_markdown": markdown})


def run_tier(
    definitions: list[AgentDefinition],
    connect: Callable[[], duckdb.DuckDBPyConnection],
    ctx: AnalysisContext,
    settings: RunnerSettings,
    warnings: list[str],
) -> list[AgentResult]:
    """All agents of `definitions` at once; results in the order of `definitions`, not yet
    rendered (`render`, once the claims are assigned)."""
    if not definitions:
        return []
    base = connect()
    results: dict[str, AgentResult] = {}
    started: dict[str, datetime] = {}
    attempts: dict[str, int] = {d.name: 0 for d in definitions}
    try:
        pending = list(definitions)
        with ThreadPoolExecutor(max_workers=len(definitions), thread_name_prefix="agent") as pool:
            while pending:
                cursors = {d.name: base.cursor() for d in pending}
                futures = {}
                for definition in pending:
                    attempts[definition.name] += 1
                    started.setdefault(definition.name, _now())
                    futures[definition.name] = pool.submit(_analyze, definition, cursors[definition.name], ctx)
                retry: list[AgentDefinition] = []
                for definition in pending:
                    try:
                        result = futures[definition.name].result(timeout=settings.timeout_seconds)
                        result = result.model_copy(update={
                            "started_at": started[definition.name], "finished_at": _now(),
                            "attempts": attempts[definition.name],
                        })
                        results[definition.name] = result
                        continue
                    except FutureTimeout:
                        cursors[definition.name].interrupt()
                        message = f"timed out after {settings.timeout_seconds:.0f} s"
                    except Exception as exc:  # noqa: BLE001 - an agent's failure is reported, not raised
                        message = f"{type(exc).__name__}: {exc}"
                    if attempts[definition.name] < settings.attempts:
                        retry.append(definition)
                    else:
                        results[definition.name] = _error_result(
                            definition, message, attempts[definition.name], started[definition.name]
                        )
                        warnings.append(
                            f"agent {definition.name} failed after {attempts[definition.name]} attempts ({message}); "
                            "its category is not analyzed in this report"
                        )
                pending = retry
    finally:
        base.close()
    return [results[d.name] for d in definitions]
