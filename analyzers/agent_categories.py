"""Which compute agent owns which op category and kernel category: read from the
`agent_categories` seed, the one place the mapping lives."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb


@dataclass(frozen=True)
class AgentCategories:
    op_categories: dict[str, tuple[str, ...]]  # agent -> the op categories it owns
    kernel_agents: dict[str, str]  # kernel taxonomy category -> the agent its kernels belong to
    relabel_agents: dict[str, str]  # kernel category -> the agent that takes `other` ops mostly of it

    def owned_by(self, agent: str) -> tuple[str, ...]:
        return self.op_categories.get(agent, ())

    @property
    def system_kernel_categories(self) -> frozenset[str]:
        """Kernel categories whose agent owns no op category (a system-tier agent: memcpy and
        memset belong to the transfer findings): their kernels enter no compute agent."""
        return frozenset(c for c, agent in self.kernel_agents.items() if agent not in self.op_categories)

    @property
    def owned(self) -> frozenset[str]:
        """Every op category some agent owns (the generic agent takes the rest)."""
        return frozenset(c for categories in self.op_categories.values() for c in categories)


def load_agent_categories(db: duckdb.DuckDBPyConnection) -> AgentCategories:
    rows = db.execute(
        "select category, category_kind, agent, takes_other_ops from agent_categories order by category_kind, category"
    ).fetchall()
    op_categories: dict[str, list[str]] = {}
    for category, kind, agent, _ in rows:
        if kind == "op":
            op_categories.setdefault(agent, []).append(category)
    return AgentCategories(
        op_categories={agent: tuple(categories) for agent, categories in op_categories.items()},
        kernel_agents={category: agent for category, kind, agent, _ in rows if kind == "kernel"},
        relabel_agents={category: agent for category, kind, agent, takes in rows if kind == "kernel" and takes},
    )
