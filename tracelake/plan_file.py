"""The compiled plans as they are stored: a warehouse's incremental plan (warehouse/dbt/plan.json)
and the plans shipped with the package (tracelake/compiled/), all written by dbt's compile."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class PlannedModelFile(BaseModel):
    name: str
    relation: str
    sql: str
    depends_on: list[str] = []  # relations of the planned models it reads, directly or through views


class PlanFile(BaseModel):
    """Incremental models in dependency order, their SQL with a placeholder for the new trace ids."""

    fingerprint: str
    models: list[PlannedModelFile]


class SeedFile(BaseModel):
    name: str
    relation: str
    file: str  # Parquet file beside the plan: the seed as dbt loaded it (dbt's column types)


class BuildNodeFile(BaseModel):
    name: str
    relation: str
    materialized: Literal["view", "table", "incremental"]
    sql: str  # dbt's compiled SELECT of a full build (--full-refresh)
    depends_on: list[str]  # relations of the models and seeds it reads


class BuildPlanFile(BaseModel):
    """What `dbt build` runs on an empty warehouse, as dbt compiled it: the schemas, the seeds,
    then every model in dependency order."""

    fingerprint: str
    schemas: list[str]
    seeds: list[SeedFile]
    nodes: list[BuildNodeFile]
