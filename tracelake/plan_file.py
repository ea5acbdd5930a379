"""The compiled incremental plan as it is stored (warehouse/dbt/plan.json)."""

from __future__ import annotations

from pydantic import BaseModel


class PlannedModelFile(BaseModel):
    name: str
    relation: str
    sql: str


class PlanFile(BaseModel):
    fingerprint: str
    models: list[PlannedModelFile]
