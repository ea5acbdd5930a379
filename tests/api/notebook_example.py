# %% [markdown]
# # A notebook session with TraceLake
# Run by tests/api/test_python_api.py as a script (the `# %%` cells open as a notebook in VS Code
# or Jupytext). The warehouse, the traces and the report folder come from the environment.

# %%
import json
import os
import time

import polars as pl

import tracelake

warehouse = os.environ["NOTEBOOK_WAREHOUSE"]
first, second, written_by_cli = os.environ["NOTEBOOK_TRACES"].split(os.pathsep)
report = os.environ["NOTEBOOK_OUT"]

# %% Ingest a trace with tags
ingested = tracelake.open(warehouse, create=True).ingest([first], tags={"model": "bert", "run": "notebook"})
assert not ingested.failed, ingested.failed
first_id = ingested.trace_ids[0]

# %% Open the warehouse and query it into polars
wh = tracelake.open(warehouse)
traces = wh.traces()
busy = wh.sql("select trace_id, busy_time_ms from gpu_timeline where busy_time_ms > $floor", {"floor": 0.0}).pl()
kernels = wh.table("kernels", trace="model=bert")
top = (kernels.group_by("name").agg(pl.col("dur_us").sum().alias("total_us"))
       .sort("total_us", descending=True).head(3))

# %% Analyze a second trace: the ranked findings come back as typed objects
analysis = tracelake.analyze(second, out=report, warehouse=warehouse)
p1 = analysis.findings[0]

# %% The handle sees what another writer (the CLI beside this notebook) publishes
deadline = time.monotonic() + 300
while time.monotonic() < deadline and len(wh.traces()) < 3:
    time.sleep(0.2)

print(json.dumps({
    "first_id": first_id,
    "trace_count_at_open": traces.height,
    "traces_type": type(traces).__name__,
    "busy_rows": busy.height,
    "kernel_rows": kernels.height,
    "kernel_trace_ids": sorted(set(kernels["trace_id"].to_list())),
    "top_kernel": top["name"][0],
    "analysis_trace_id": analysis.trace_id,
    "analysis_md": str(analysis.analysis_md),
    "p1_rank": p1.global_rank,
    "p1_title": p1.title,
    "finding_count": len(analysis.findings),
    "trace_count_at_end": len(wh.traces()),
    "tables": len(wh.tables()),
}))
wh.close()
