"""TraceLake: PyTorch profiler traces -> Parquet + DuckDB warehouse -> dbt models -> reports.

From Python (tracelake/api.py):

    import tracelake
    wh = tracelake.open()              # a handle: .sql(), .table(), .traces() read; .ingest(), .analyze() write
    wh.ingest(["trace.json.gz"], tags={"run": "nightly-42"})
    result = wh.analyze("trace.json.gz", out="report/")

The stage folders are subpackages (tracelake.ingest, tracelake.analyzers, ...), so the API's verbs
are the handle's methods.
"""

__version__ = "0.1.0"

# the API is imported on first use: the command line starts without pydantic and polars
_API = ("open", "analyze", "diff", "TraceDiff", "WarehouseHandle", "IngestResult", "IngestedTrace", "Analysis", "JobAnalysis")
__all__ = ["__version__", *_API]


def __getattr__(name: str) -> object:
    if name in _API:
        from tracelake import api  # noqa: PLC0415 - the API loads pydantic and polars: only on first use

        return getattr(api, name)
    raise AttributeError(f"module 'tracelake' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
