"""Every threshold ingest applies to a trace, each with where its value comes from.

Kept free of imports but `os`: the read-ahead thread (ingest/prefetch.py) checks the size limits too.
"""

from __future__ import annotations

import os

# A trace with any malformed event is still analyzed, but the report should say so.
DROPPED_EVENTS_MAX = 0

# ---- the file ----
# Largest trace file read (on disk) and largest JSON decoded (a .gz after decompression). The
# biggest trace bench/ingest.py runs is 1 GB of JSON; decoding takes ~4x the JSON size in memory,
# so 4 GiB already needs a 16+ GB machine. Above it the file is refused, not read until memory ends.
MAX_TRACE_FILE_BYTES = 4 << 30
MAX_TRACE_JSON_BYTES = 4 << 30
# A smaller JSON cap for a small machine (and for the tests, which cannot inflate 4 GiB quickly):
# bytes, from the environment; only lower than the default takes effect.
MAX_TRACE_JSON_BYTES_ENV = "TRACELAKE_MAX_TRACE_JSON_BYTES"
_json_cap = os.environ.get(MAX_TRACE_JSON_BYTES_ENV, "")
if _json_cap.isdigit() and 0 < int(_json_cap) < MAX_TRACE_JSON_BYTES:
    MAX_TRACE_JSON_BYTES = int(_json_cap)

# ---- a compressed file ----
# Largest JSON-to-gzip size ratio accepted, checked while decompressing. The 44 gzip traces in
# tests/data and /work/shared/traces (as their profilers wrote them) expand 10.8-21.1 times over the
# whole file and at most 26.4 times over any part of it past its first MiB (tests/data b200
# eager_trace); deflate reaches ~1,030 on runs of one byte (a whitespace bomb). 10x the largest seen:
MAX_GZIP_EXPANSION_RATIO = 250
# The ratio is checked once this much JSON is out, so a small file is never refused for compressing
# well and a bomb costs at most this much memory (plus one output step) before it is refused.
GZIP_RATIO_CHECK_AFTER_BYTES = 16 << 20
# Compressed bytes fed to zlib at once, and most JSON it may return per call: the memory a
# decompression holds beyond its output, and how far past a limit it can get before the check.
GZIP_INPUT_STEP_BYTES = 1 << 20
GZIP_OUTPUT_STEP_BYTES = 8 << 20

# ---- labels joined onto every row ----
# Process and thread names, process labels (ph "M" metadata events) and nn.Module frame names are
# copied onto every op row of their process, thread or module downstream; longer ones are clipped to
# this many characters (a 100 KB thread name made a 124 KB trace take 10.7 GB). The longest in every
# real trace in tests/data and /work/shared/traces: 31 ("thread 2919752 (pt_main_thread)"); 10x:
MAX_LABEL_CHARS = 320
# Any other event name (an op, a kernel, an annotation) longer than this is clipped too: a name is
# copied onto every row it is joined to (a kernel's onto each op signature it serves). The longest in
# the real traces: a 2,004-character composable-kernel GEMM (resnet_act_checkpoint); 10x:
MAX_EVENT_NAME_CHARS = 20_000

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
# The event list is held as its JSON text in pieces of about this size (ingest/event_list.py), each
# decoded into one object per event (56 bytes) only while it is counted or read: 1 MiB holds 2,000-
# 4,000 Kineto events (248-577 bytes each in tests/data) or ~350,000 empty ones (20 MB of objects);
# 30 M empty events decoded at once held 1.65 GB.
EVENT_PIECE_BYTES = 1 << 20

# ---- the host call tree: events nested deeper are kept in `events` but left out of the tree ----
# Each in-tree cpu op carries its cpu-op ancestors and its nn.Module chain, so a nesting of depth d
# costs d^2 rows (the probe's 20,000 nested ops: 8.3 GB). The deepest nesting in every real trace
# in tests/data and /work/shared/traces: 8 open cpu ops (cpu_depth 7) and 7 nn.Module frames
# (resnet_act_checkpoint, BERT, TimeSformer); 256 is over 30 times that.
MAX_HOST_OP_NESTING = 256
# Every host event (python frames too): a python frame opens per Python call, and Python stops
# at its recursion limit (1,000 frames by default); the deepest real trace we have nests 11 levels.
MAX_HOST_TREE_DEPTH = 2_000

# ---- exact timestamps (ingest/exact_time.py) ----
# Above this start (µs) float64 steps exceed 1 ns (2**43 µs, ~102 days: only an absolute clock, such as
# the epoch µs of 2023 Kineto traces, ~1.7e15, reaches it), so ts is read exactly from its text and
# stored as an offset from an integer base.
EXACT_TS_ABOVE_US = float(2**43)
