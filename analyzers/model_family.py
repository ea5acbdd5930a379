"""Which model a trace runs: its models (the outermost module calls that hold layers), the family
rule their classes match (seeds/model_family_rules.csv) and the published checkpoint the numbers
match (seeds/model_configs.csv)."""

from __future__ import annotations

import re

import duckdb

from tracelake.analyzers import settings
from tracelake.analyzers.model_facts import ModuleFacts, RootModule, layer_class
from tracelake.analyzers.model_info import ModelComponent, ModelInfo
from tracelake.core.markdown_text import code
from tracelake.core.sql_text import sql_literal

# The task head or suffix of a model class (Hugging Face / diffusers naming): the rest names the family.
_TASK_SUFFIX = re.compile(r"(For[A-Z]\w*|LMHeadModel|PreTrainedModel|Model(With[A-Z]\w*)?)$")

# The family rules matching any of the trace's module classes, best rule first.
_FAMILY_MATCHES_SQL = """
select model_family_rules.rule_order, model_family_rules.family, model_family_rules.kind, classes.module_class
from model_family_rules
join (select unnest($classes::varchar[]) as module_class) as classes
  on regexp_matches(classes.module_class, model_family_rules.class_pattern)
order by model_family_rules.rule_order, classes.module_class
"""

# The first published checkpoint whose configuration the trace's numbers match.
_CHECKPOINT_SQL = """
select checkpoint, hidden_size, num_layers, ffn_size, vocab_size
from model_configs
where family = $family and hidden_size = $hidden and num_layers = $layers
  and (ffn_size is null or $ffn::integer is null or ffn_size = $ffn)
  and (vocab_size is null or $vocab::integer is null or vocab_size = $vocab)
order by match_order
limit 1
"""


def family_of(db: duckdb.DuckDBPyConnection, facts: ModuleFacts, classes: list[str],
              sql: list[str]) -> tuple[str, str, str] | None:
    """The first family rule (seeds/model_family_rules.csv) that matches a module class: (family,
    kind, the matching class to cite: the outermost one)."""
    if not classes:
        return None
    matches = db.execute(_FAMILY_MATCHES_SQL, {"classes": classes}).fetchall()
    if not matches:
        return None
    sql.append(" ".join(_FAMILY_MATCHES_SQL.replace("$classes", "[" + ", ".join(sql_literal(c) for c in classes)
                                                    + "]").split()))
    best_rule, family, kind = matches[0][0], matches[0][1], matches[0][2]
    matched = [r[3] for r in matches if r[0] == best_rule]
    matched.sort(key=lambda c: (not re.search(r"(Model|For[A-Z]\w*)$", c), facts.module_instances.get(c, 1), -len(c)))
    return family, kind, matched[0]


def class_stem(module_class: str) -> str:
    """The model class without its task head: TimesformerForVideoClassification -> Timesformer."""
    return _TASK_SUFFIX.sub("", module_class) or module_class


def model_components(db: duckdb.DuckDBPyConnection, facts: ModuleFacts, roots: list[RootModule],
                     total_us: float) -> list[RootModule]:
    """The outermost module classes that are models: they hold a repeated layer of their own, their
    classes match a family rule, or they hold most of the trace's GPU kernel time (`total_us`; most
    GPU kernel time first)."""
    for root in roots:
        root.family = family_of(db, facts, root.scope_classes, [])
    return [r for r in roots if r.holds_layers or r.family is not None
            or (total_us > 0 and r.kernel_time_us / total_us > settings.MODEL_ROOT_GPU_TIME_SHARE_MIN)]


def info_components(components: list[RootModule]) -> list[ModelComponent]:
    total = sum(c.kernel_time_us for c in components)
    return [ModelComponent(module_class=c.module_class, family=c.family[0] if c.family else None, calls=c.calls,
                           kernel_time_ms=round(c.kernel_time_us / 1000.0, 3),
                           kernel_time_percent=round(100.0 * c.kernel_time_us / total, 1) if total else 0.0)
            for c in components]


def component_text(component: ModelComponent) -> str:
    calls = f" x{component.calls}" if component.calls > 1 else ""
    return f"{component.module_class}{calls} {component.kernel_time_percent:.0f} %"


def model_sentence(model: RootModule, components: list[RootModule]) -> str:
    """The evidence that names the model: its class, or the pipeline of models it leads."""
    layer = layer_class(model.descendants)
    layers = f" ({layer[1]} {code(layer[0])} layers)" if layer else ""
    if len(components) == 1:
        return f"the outermost nn.Module class {code(model.module_class)}{layers} names the model"
    parts = ", ".join(f"{code(c.module_class)} ({component_text(c).split(' ', 1)[1] if ' ' in component_text(c) else ''})"
                      for c in info_components(components))
    return (f"a pipeline of {len(components)} models, each an outermost nn.Module call with layers of its own, a "
            f"family rule's class or most of the GPU time: "
            f"{parts} of their GPU kernel time; the time goes to {code(model.module_class)}{layers}, which names it")


def checkpoint_of(db: duckdb.DuckDBPyConnection, info: ModelInfo) -> tuple | None:
    """(checkpoint, hidden, layers, ffn, vocab) of the first published configuration
    (seeds/model_configs.csv) the trace's numbers match."""
    return db.execute(_CHECKPOINT_SQL, {"family": info.model_family, "hidden": info.hidden_size,
                                        "layers": info.num_layers, "ffn": info.ffn_size,
                                        "vocab": info.vocab_size}).fetchone()
