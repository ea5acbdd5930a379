"""The opening of analysis.md: its title, the GPU timeline numbers, the metric table, the warnings
and the Executive Summary's sentences."""

from __future__ import annotations

from typing import Any

from tracelake.analyzers.model_id import UNKNOWN
from tracelake.core.markdown_text import Markdown, code, one_line, text
from tracelake.core.text_format import finite
from tracelake.reports.analysis_format import DASH, cell, fmt_ms, fmt_pct, fmt_signed_ms, fmt_signed_pct
from tracelake.reports.report_inputs import ReportInputs

# The trace-quality check that grades how much GPU time is linked to a host launch (trace_quality.sql);
# when it fails, the timeline and every finding describe only the linked part of the GPU work.
LINKED_SHARE_CHECK = "linked_gpu_time_share"
UNLINKED_CHECK = "unlinked_gpu_events"


def title_names(inputs: ReportInputs) -> dict[str, Any]:
    """What the title names: the model, the platform and (comparative scope) the second platform,
    each with whose word it is and the trace's own device (the template words an assumed one)."""
    model = one_line(inputs.title_model or "")
    if not model or model in (UNKNOWN, "Unknown model", "None"):
        model = inputs.model_info.display_name
    first = {"name": inputs.platform, "source": inputs.platform_source, "device": inputs.device_name}
    second = {"name": inputs.platform2 or inputs.platform, "source": inputs.platform2_source,
              "device": inputs.device2_name}
    return {"model": model, "platform": first,
            "platform2": second if inputs.comparison_scope == "comparative" else None}


def gpu_view(values: dict[str, float] | None) -> dict[str, float | None]:
    values = values or {}
    total = finite(values.get("total_time_ms"))
    out: dict[str, float | None] = {"total_time_ms": total}
    for key in ("computation", "idle", "exposed_comm", "exposed_memcpy", "busy"):
        pct = finite(values.get(f"{key}_time_percent"))
        ms = finite(values.get(f"{key}_time_ms"))
        if pct is None and ms is not None and total:
            pct = 100.0 * ms / total
        if ms is None and pct is not None and total is not None:
            ms = pct * total / 100.0
        out[f"{key}_percent"], out[f"{key}_ms"] = pct, ms
    return out


def analysis_window_view(inputs: ReportInputs, gpu1: dict) -> dict[str, float | None] | None:
    """`gpu1` over the analysis window (E2E) when the window-edge idle is left out of it (workload_facts:
    the first or last gap long enough to be host set-up): the same window the impacts are a % of. All
    the GPU work is inside the window; only idle time is outside it. None when the window is the timeline."""
    measured, window = finite(gpu1.get("total_time_ms")), finite(inputs.priority.e2e_time_ms)
    if not measured or not window or abs(measured - window) < 1e-9:
        return None
    view: dict[str, float | None] = {"total_time_ms": window}
    for key in ("computation", "idle", "exposed_comm", "exposed_memcpy", "busy"):
        in_window = gpu1.get(f"{key}_ms")
        if key == "idle" and in_window is not None:
            in_window -= measured - window
        view[f"{key}_ms"], view[f"{key}_percent"] = in_window, None if in_window is None else 100.0 * in_window / window
    return view


def metric_rows(inputs: ReportInputs, gpu1: dict, gpu2: dict | None) -> list[dict[str, str]]:
    def diff(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else b - a

    def ms(value: float | None) -> Markdown:
        return Markdown(DASH if value is None else f"{fmt_ms(value)} ms")

    def pct(value: float | None) -> Markdown:
        return Markdown(DASH if value is None else f"{fmt_pct(value)}%")

    rows = [
        ("Total Time", ms(gpu1["total_time_ms"]), gpu2 and ms(gpu2["total_time_ms"]), "total_time_ms"),
        ("Compute %", pct(gpu1["computation_percent"]), gpu2 and pct(gpu2["computation_percent"]),
         "computation_percent"),
        ("Idle %", pct(gpu1["idle_percent"]), gpu2 and pct(gpu2["idle_percent"]), "idle_percent"),
        ("Exposed Communication %", pct(gpu1["exposed_comm_percent"]), gpu2 and pct(gpu2["exposed_comm_percent"]),
         "exposed_comm_percent"),
    ]
    result = []
    for label, value1, value2, key in rows:
        row = {"label": label, "value1": value1, "value2": value2 or DASH, "difference": DASH}
        if gpu2 is not None:
            delta = diff(gpu1[key], gpu2[key])
            if key == "total_time_ms":
                relative = 100.0 * delta / gpu1[key] if delta is not None and gpu1[key] else None
                row["difference"] = DASH if delta is None else \
                    Markdown(f"{fmt_signed_ms(delta)} ms ({fmt_signed_pct(relative)}%)")
            else:
                row["difference"] = DASH if delta is None else Markdown(f"{fmt_signed_pct(delta)} pp")
        result.append(row)
    result.append({"label": "Top Bottleneck Category", "value1": cell(inputs.top_bottleneck_category or DASH),
                   "value2": cell(inputs.top_bottleneck_category2 or DASH), "difference": DASH})
    return result


def warning_lines(inputs: ReportInputs) -> list[str]:
    warnings = [one_line(w) for w in inputs.warnings if w and w.strip()]
    for result in inputs.agent_results:
        if result.status == "ERROR" and not any(result.agent in w for w in warnings):
            warnings.append(f"agent {result.agent} ({result.tier} tier) failed: {one_line(result.error or 'no error text')}; "
                            "its category is missing from the findings")
    return warnings


def failed_checks(inputs: ReportInputs) -> list[dict[str, Any]]:
    """The trace-quality checks that failed, in check order: the report opens with them."""
    return [c for c in inputs.quality_checks if c.get("verdict") == "fail"]


def quality_problems(failed: list[dict[str, Any]]) -> list[dict[str, Markdown]]:
    return [{"name": code(one_line(c.get("check_name") or DASH)), "detail": text(one_line(c.get("detail") or ""))}
            for c in failed]


def linked_share_failed(failed: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((c for c in failed if c.get("check_name") == LINKED_SHARE_CHECK), None)


def _timeline_sentence(inputs: ReportInputs, gpu1: dict, linked_share: dict[str, Any] | None) -> str:
    breakdown = (f"{fmt_pct(gpu1['computation_percent'])}% computation, {fmt_pct(gpu1['idle_percent'])}% idle, "
                 f"{fmt_pct(gpu1['exposed_comm_percent'])}% exposed communication and "
                 f"{fmt_pct(gpu1['exposed_memcpy_percent'])}% exposed memory copies.")
    if linked_share is None:
        unlinked = next((c for c in inputs.quality_checks if c.get("check_name") == UNLINKED_CHECK
                         and (c.get("value") or 0) > 0), None)
        warned = any(c.get("check_name") == LINKED_SHARE_CHECK and c.get("verdict") == "warn" for c in inputs.quality_checks)
        detail = one_line(unlinked.get("detail") or "").split(";")[0] if unlinked is not None else ""
        left_out = (f" {text(detail)}: that GPU work is outside these numbers (trace quality {code(LINKED_SHARE_CHECK)} "
                    "warns)." if detail and warned else "")
        return (f"The trace {code(inputs.trace_name)} spans {fmt_ms(gpu1['total_time_ms'])} ms of GPU time: "
                f"{breakdown}{left_out}")
    check = code(LINKED_SHARE_CHECK)
    if not gpu1["total_time_ms"]:
        return (f"The trace {code(inputs.trace_name)} has no GPU timeline: none of its GPU work could be tied to a "
                f"host launch, by flow or by correlation id (trace quality {check} failed, see above), so nothing "
                "below measures its GPU time.")
    share = finite(linked_share.get("value"))
    share_text = "less than half" if share is None else f"only {fmt_pct(100.0 * share)}%"
    return (f"Of the GPU time of {code(inputs.trace_name)}, {share_text} could be tied to a host launch (trace "
            f"quality {check} failed, see above); that linked part spans {fmt_ms(gpu1['total_time_ms'])} ms: {breakdown}")


def _analysis_window_sentence(inputs: ReportInputs, gpu1: dict) -> str:
    """When the window-edge idle is left out of E2E, what the impact percentages are of."""
    measured, window = finite(gpu1.get("total_time_ms")), finite(inputs.priority.e2e_time_ms)
    if not measured or not window or abs(measured - window) < 1e-9:
        return ""
    return (f"{fmt_ms(measured - window)} ms of that is idle at the profile window's edges (a first or last gap "
            f"of the timeline long enough to be host set-up, not a step), so every impact below is a % of the "
            f"{fmt_ms(window)} ms analysis window without it (E2E).")


def _capture_merge_sentence(inputs: ReportInputs) -> str:
    """What the graph-capture merge did (trace_quality graph_replay, `info` once the capture traces
    attribute every replayed GPU event)."""
    replay = next((c for c in inputs.quality_checks if c.get("check_name") == "graph_replay"), None)
    if replay is None or replay.get("verdict") != "info":
        return ""
    return f"GPU-graph replay with its capture traces: {text(one_line(replay.get('detail') or ''))}."


def summary_text(inputs: ReportInputs, gpu1: dict, gpu2: dict | None, cards: list[dict[str, Any]]) -> Markdown:
    parts = []
    failed = failed_checks(inputs)
    platform, platform2 = text(inputs.platform), text(inputs.platform2 or inputs.platform)
    if gpu2 is not None and gpu1["total_time_ms"] and gpu2["total_time_ms"]:
        t1, t2 = gpu1["total_time_ms"], gpu2["total_time_ms"]
        if t2 < t1:
            speed = f"Trace 2 ({platform2}) is {fmt_pct(100.0 * (t1 - t2) / t1)}% faster"
        elif t2 > t1:
            speed = f"Trace 2 ({platform2}) is {fmt_pct(100.0 * (t2 - t1) / t1)}% slower"
        else:
            speed = "Both traces take the same time"
        parts.append(f"{speed} than trace 1 ({platform}): {fmt_ms(t2)} ms vs {fmt_ms(t1)} ms of GPU time.")
    else:
        parts.append(_timeline_sentence(inputs, gpu1, linked_share_failed(failed)))
        parts.append(_analysis_window_sentence(inputs, gpu1))
        parts.append(_capture_merge_sentence(inputs))
    quantified = [c for c in cards if c["impact"]["quantified"]]
    if quantified:
        best = quantified[0]
        # the first is not always the largest: a finding another waits for ranks above it
        released = [c for c in cards if c.get("replay") and c["replay"]["after_rank"] == best["rank"]]
        largest = max(released, key=lambda c: c["replay"]["saving_ms"]) if released else None
        parts.append(f"{len(cards)} finding(s) are ranked below in the order they pay off; the first, P{best['rank']} "
                     f"({best['title']}), could recover {best['impact']['text'].split(' (')[0]}"
                     + (f" and releases P{largest['rank']} ({largest['title']}), "
                        f"{largest['impact']['text'].split(' (')[0]}, which is realisable only after it."
                        if largest else "."))
    elif cards:
        parts.append(f"{len(cards)} finding(s) are listed below; none carries a time estimate.")
    elif failed:
        parts.append("No finding was made from what the trace supports; the failing trace-quality checks above say "
                     "what it lacks, so this is no sign that the workload has no bottleneck.")
    elif inputs.skipped_steps or inputs.graph_replay_steps:
        parts.append("No finding was made from what the trace supports; the note above says which analyses "
                     "it does not allow, so this is no sign that the workload has no bottleneck.")
    else:
        parts.append("No optimization opportunity was found.")
    parts.append(f"Analysis mode: {text(inputs.mode)} ({text(inputs.mode_reason)}).")
    return Markdown(" ".join(part for part in parts if part))
