"""The optional LLM runner: pipe an agent's spec and metrics to an external command and take
findings markdown back. Its output is validated like any other; on failure the caller keeps
the deterministic findings."""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import dataclass

from tracelake.agents.registry import AgentDefinition
from tracelake.analyzers.contracts import AgentResult

PLACEHOLDER_MARKERS = ("{{", "{%", "TODO", "<placeholder>")


class LlmOutputRejected(Exception):
    """The command failed or its markdown does not meet the findings contract."""


@dataclass(frozen=True)
class LlmCommand:
    command: str
    timeout_seconds: float


def llm_prompt(definition: AgentDefinition, result: AgentResult) -> str:
    spec = definition.spec_path.read_text() if definition.spec_path.exists() else ""
    payload = {
        "agent": definition.name,
        "tier": definition.tier,
        "metrics": result.metrics,
        "deterministic_findings": [f.model_dump(mode="json") for f in result.findings],
    }
    return (
        f"{spec}\n\n---\nWrite the findings markdown for this agent from the metrics below. Keep every "
        f"finding's numbers as given.\n\n```json\n{json.dumps(payload, indent=1, default=str)}\n```\n"
    )


def validate_findings_markdown(markdown: str, result: AgentResult) -> list[str]:
    problems = []
    if not markdown.strip().startswith("#"):
        problems.append("does not start with a markdown title")
    if "**Status**" not in markdown:
        problems.append("has no **Status** line")
    for marker in PLACEHOLDER_MARKERS:
        if marker in markdown:
            problems.append(f"contains placeholder text {marker!r}")
    for finding in result.findings:
        if finding.title not in markdown:
            problems.append(f"drops the finding {finding.title!r}")
    return problems


def run_llm(command: LlmCommand, definition: AgentDefinition, result: AgentResult) -> str:
    try:
        completed = subprocess.run(
            shlex.split(command.command),
            input=llm_prompt(definition, result),
            capture_output=True,
            text=True,
            timeout=command.timeout_seconds,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LlmOutputRejected(f"LLM command failed: {exc}") from None
    if completed.returncode != 0:
        raise LlmOutputRejected(f"LLM command exited {completed.returncode}: {completed.stderr.strip()[:200]}")
    problems = validate_findings_markdown(completed.stdout, result)
    if problems:
        raise LlmOutputRejected("LLM findings rejected: " + "; ".join(problems))
    return completed.stdout
