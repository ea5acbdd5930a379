"""The one renderer of an agent's advice: an AdviceText (a fact and its values) in, the sentences
of a finding out.

The wording lives in analyzers/advice/<agent>.toml, one table per agent, one row per fact that
triggers advice (`[compute_bound]`, `[decode_paged]`, ...). A row's fields are the parts of the
finding it writes (`insight`, `action`, `reasoning`, `resolution`; a part a row leaves out is
empty), each a jinja template over the values the analyzer passed. A row may also hold a clause
that several rows share (`[misaligned_shapes] text = ...`), pulled in with
`{% include "gemm.misaligned_shapes.text" %}` (template names are `<agent>.<fact>.<part>`).

To add or change a finding's text:

1. The analyzer decides which fact holds and gathers the values:
   `AdviceText(agent="gemm", fact="tiny_m", values={"small_count": 3, ...})`. Values are numbers,
   flags and trace strings, never sentences.
2. The sentence goes in the table row of that fact. Numbers are formatted there with the
   `fmt` filter (Python's format spec: `{{ share|fmt('.1f') }}`, `{{ tokens|fmt(',') }}`),
   `number` (compute.fmt: a dash for a missing value) and `clip` (a trace string clipped to a length).
   Thresholds are read from `settings` (analyzers/settings.py), so the sentence names the threshold
   the rule used.
3. The agent's `advise` hook returns `render_advice(...)`; the finding carries the rendered text.
   A value missing from the call is an error (StrictUndefined), not an empty string.

Rendering writes the sentences as the analyzers always wrote them, with trace strings in code
spans and no escaping: the finding's JSON (priority_data.json) holds that text, and the markdown
outputs escape the trace strings in it once, where they are rendered (agents/render.py,
core.markdown_text.TraceStrings).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import jinja2

from tracelake.analyzers import compute, settings
from tracelake.analyzers.compute import Advice
from tracelake.analyzers.contracts import AdviceText
from tracelake.core.text_format import bytes_text, clip

ADVICE_TABLES = Path(__file__).parent / "advice"
ADVICE_PARTS = ("insight", "action", "reasoning", "resolution")


def advice_templates(folder: Path = ADVICE_TABLES) -> dict[str, str]:
    """Every template of the advice tables, named `<agent>.<fact>.<part>`."""
    templates: dict[str, str] = {}
    for table in sorted(folder.glob("*.toml")):
        with table.open("rb") as handle:
            rows = tomllib.load(handle)
        for fact, parts in rows.items():
            for part, source in parts.items():
                templates[f"{table.stem}.{fact}.{part}"] = source
    return templates


def _environment() -> jinja2.Environment:
    # plain text: no trimming of blocks (a clause may start with the space that joins it to the
    # sentence before) and no escaping (the markdown outputs escape trace strings where they render)
    environment = jinja2.Environment(
        loader=jinja2.DictLoader(advice_templates()),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    environment.filters.update(fmt=format, number=compute.fmt, clip=clip, size=bytes_text)
    environment.globals.update(settings=settings)
    return environment


_ENVIRONMENT = _environment()


def render_part(text: AdviceText, part: str) -> str:
    """One part of the advice ("" when the fact's row has none)."""
    name = f"{text.agent}.{text.fact}.{part}"
    try:
        template = _ENVIRONMENT.get_template(name)
    except jinja2.TemplateNotFound:
        if not _ENVIRONMENT.list_templates(filter_func=lambda n: n.startswith(f"{text.agent}.{text.fact}.")):
            raise KeyError(f"no advice row `{text.fact}` in analyzers/advice/{text.agent}.toml") from None
        return ""
    return template.render(text.values)


def render_advice(text: AdviceText) -> Advice:
    """The advice's four parts, rendered from its row of the agent's table."""
    return Advice(**{part: render_part(text, part) for part in ADVICE_PARTS})
