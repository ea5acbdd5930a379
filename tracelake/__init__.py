"""TraceLake: PyTorch profiler traces -> Parquet + DuckDB warehouse -> dbt models -> reports."""

__version__ = "0.1.0"
