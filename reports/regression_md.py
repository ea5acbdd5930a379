"""Markdown for `tracelake compare`: the verdict line first, then the tables (jinja2 template).

Only arranges and formats a RegressionVerdict; every number comes from the verdict. The template
prints every value as literal text (op names are data); what this module composes is escaped here.
"""

from __future__ import annotations

import math
from pathlib import Path

from tracelake.analyzers import settings
from tracelake.analyzers.regression import MetricChange, OpSignatureChange, RegressionVerdict, SideSamples
from tracelake.analyzers.workload_pairs import SideTrace, WorkloadComparison
from tracelake.core.markdown_text import Markdown, code, one_line, text
from tracelake.core.templates import markdown_environment

TEMPLATES = Path(__file__).parent / "templates"
TEMPLATE = "regression.md.j2"
PAIRS_TEMPLATE = "workload_comparison.md.j2"
DASH = "—"
DIMS_CHARS = 60  # input dims longer than this are cut in the op table; --format json has them whole
NAME_CHARS = 70
FAILURES_LISTED = 10  # failing metrics named under the verdict line

_environment = markdown_environment(TEMPLATES)


def _ms(value: float | None) -> str:
    return DASH if value is None or not math.isfinite(value) else f"{value:,.3f}"


def _signed_ms(value: float | None) -> str:
    return DASH if value is None or not math.isfinite(value) else f"{value:+,.3f}"


def _pct(value: float | None) -> str:
    return DASH if value is None or not math.isfinite(value) else f"{value:+.1f} %"


def _share(value: float | None) -> str:
    return DASH if value is None or not math.isfinite(value) else f"{value:.1f} %"


def _calls(value: float | None) -> str:
    return DASH if value is None else f"{value:g}"


def _cell(value: str, limit: int | None = None) -> Markdown:
    """`value` on one line, cut to `limit` characters, as literal text for a table cell."""
    line = one_line(value)
    if limit is not None and len(line) > limit:
        line = line[: limit - 3].rstrip() + "..."
    return text(line) or Markdown(DASH)


def _status(metric: MetricChange) -> str:
    if metric.fails:
        return Markdown("**FAIL** slower")
    text = metric.status.replace("_", " ")
    if metric.status in ("slower", "faster") and not metric.gating:
        return f"{text} (not gating)"
    return text


def _row(metric: MetricChange) -> dict[str, str]:
    return {
        "label": _cell(metric.label if metric.kind == "headline" else metric.name, NAME_CHARS),
        "baseline": _ms(metric.baseline_ms),
        "candidate": _ms(metric.candidate_ms),
        "delta": _signed_ms(metric.delta_ms),
        "change": _pct(metric.change_percent),
        "share": _share(metric.baseline_share_percent),
        "status": _status(metric),
        "gates": "yes" if metric.gating else "no",
    }


def _op_row(op: OpSignatureChange) -> dict[str, str]:
    return {
        **_row(op),
        "category": _cell(op.op_category),
        "dims": _cell(op.input_dims, DIMS_CHARS),
        "calls": f"{_calls(op.baseline_calls)} → {_calls(op.candidate_calls)}",
    }


def _side(side: SideSamples) -> dict[str, str]:
    traces = Markdown(", ".join(f"{code(tid)} {_cell(name)}" for tid, name in zip(side.trace_ids, side.file_names)))
    spread = "" if side.kernel_time_std_ms is None else f" ± {side.kernel_time_std_ms:,.3f}"
    unit = "step" if side.sample_source == "profiler_steps" else "trace"
    return {
        "traces": traces,
        "trace_count": str(len(side.trace_ids)),
        "devices": ", ".join(side.devices) or "unknown",
        "samples": side.sample_text,
        "kernel_time": f"{side.kernel_time_mean_ms:,.3f}{spread} ms per {unit}",
    }


def _top_ops(verdict: RegressionVerdict, limit: int) -> list[OpSignatureChange]:
    """The largest absolute changes, plus every failing op signature."""
    present = [op for op in verdict.ops if op.status not in ("new", "gone")]
    top = present[:limit]
    return top + [op for op in present[limit:] if op.fails]


def _failures_text(failures: list[str]) -> Markdown:
    shown = "; ".join(_cell(label, NAME_CHARS) for label in failures[:FAILURES_LISTED])
    return Markdown(shown + ("; ... (all in --format json)" if len(failures) > FAILURES_LISTED else ""))


def render_regression_md(verdict: RegressionVerdict, top_ops: int = settings.COMPARE_TOP_OPS) -> str:
    noise = verdict.noise
    return _environment.get_template(TEMPLATE).render(
        v=verdict,
        baseline=_side(verdict.baseline),
        candidate=_side(verdict.candidate),
        noise_band=DASH if noise.band_percent is None else f"±{noise.band_percent:.1f} %",
        baseline_cv=_share(noise.baseline_cv_percent),
        candidate_cv=_share(noise.candidate_cv_percent),
        welch_df=DASH if noise.welch_df is None else f"{noise.welch_df:.1f}",
        headline=[_row(m) for m in verdict.headline],
        categories=[_row(m) for m in verdict.categories],
        ops=[_op_row(op) for op in _top_ops(verdict, top_ops)],
        op_total=len(verdict.ops),
        new_ops=[_op_row(op) for op in verdict.ops if op.status == "new"],
        gone_ops=[_op_row(op) for op in verdict.ops if op.status == "gone"],
        failures=verdict.failures,
        failures_text=_failures_text(verdict.failures),
    )


def _traces_cell(traces: list[SideTrace]) -> Markdown:
    return Markdown(", ".join(f"{code(t.trace_id)} {_cell(t.file_name)}" for t in traces))


def render_workload_comparison_md(result: WorkloadComparison, top_ops: int = settings.COMPARE_TOP_OPS) -> str:
    """One pair and nothing unpaired: that pair's verdict as it always read. Else the verdict line,
    the pairing (each pair, its op-signature overlap and verdict; the unpaired traces), then each
    pair's verdict under its workload's heading."""
    if len(result.pairs) == 1 and not result.unpaired_baseline and not result.unpaired_candidate:
        return render_regression_md(result.pairs[0].verdict, top_ops)
    sections = [
        (_cell(pair.workload, NAME_CHARS),
         Markdown(render_regression_md(pair.verdict, top_ops).replace("\n## ", "\n### ")))
        for pair in result.pairs
    ]
    return _environment.get_template(PAIRS_TEMPLATE).render(
        result=result,
        pairs=[{"workload": _cell(p.workload, NAME_CHARS), "source": p.baseline_traces[0].workload_source,
                "baseline": _traces_cell(p.baseline_traces), "candidate": _traces_cell(p.candidate_traces),
                "overlap": _share(p.verdict.signature_overlap_percent),
                "verdict": p.verdict.verdict.replace("_", " ")} for p in result.pairs],
        unpaired=[{"side": side, "workload": _cell(t.workload, NAME_CHARS), "source": t.workload_source,
                   "trace": _traces_cell([t])}
                  for side, traces in (("baseline", result.unpaired_baseline), ("candidate", result.unpaired_candidate))
                  for t in traces],
        min_overlap=f"{settings.COMPARE_MIN_SIGNATURE_OVERLAP_PERCENT:g} %",
        sections=sections,
    )
