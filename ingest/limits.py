"""Every threshold ingest applies to a trace, each with where its value comes from.

Kept free of imports: the read-ahead thread (ingest/prefetch.py) checks the size limits too.
"""

from __future__ import annotations

# A trace with any malformed event is still analyzed, but the report should say so.
DROPPED_EVENTS_MAX = 0

# ---- the file ----
# Largest trace file read (on disk) and largest JSON decoded (a .gz after decompression). The
# biggest trace bench/ingest.py runs is 1 GB of JSON; decoding takes ~4x the JSON size in memory,
# so 4 GiB already needs a 16+ GB machine. Above it the file is refused, not read until memory ends.
MAX_TRACE_FILE_BYTES = 4 << 30
MAX_TRACE_JSON_BYTES = 4 << 30

# ---- the JSON ----
# Containers nested deeper than this are stored as null. Kineto's deepest values are an op's
# `Input Dims` lists of lists (depth 6 counting the document, the event list, the event and its
# args); msgspec's decoder raises RecursionError near Python's recursion limit (1000 frames),
# which the caller's own frames share.
MAX_JSON_DEPTH = 64

# ---- the trace window: events outside it are physically impossible and dropped ----
# The window is the median start of the trace's timed events +- the larger of a multiple of their
# median absolute deviation (MAD) and a floor. Median and MAD hold while fewer than half of the
# events are wrong (min/max are set by the outlier itself). Real traces reach 207 MADs (the sglang
# decode trace in tests/data: a 465 ms prologue before a 10 ms burst; the others stay under 60).
TRACE_WINDOW_MADS = 1000.0
# Floor of the half-width, for traces whose events bunch up (MAD ~ 0). Every trace we have seen
# spans 3 ms to 3.4 s (tests/data, HTA's sampled traces); torch.profiler records a few steps and
# Kineto's on-demand traces default to 500 ms. An event 10 minutes from the rest is not real.
TRACE_WINDOW_MIN_HALF_WIDTH_US = 600e6
# Events whose start times estimate the window (every k-th event). On the traces in tests/data
# and a 55 MB bench trace, 5,000 give the median within 0.11 MAD and the MAD within 0.1 % of all
# events' values, in ~2 ms (20,000 took 15 ms: the sampled events are scattered in memory).
TRACE_WINDOW_SAMPLE_EVENTS = 5_000
