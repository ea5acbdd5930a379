"""Fuzzing ingest with mutated real traces: no input crashes it, none damages the warehouse.

With a fixed seed, every real trace below is mutated in each class of MUTATIONS (byte flips,
truncation, type swaps, deleted fields, huge / negative / non-finite numbers, deep nesting, hostile
strings, dangling flows, shuffled timestamps, bad metadata, impossible times, broken structure,
duplicates, and several of these at once), and in each of the reliability probe's classes
(tests/ingest/probe_cases.py: GPU category and phase variants, string and epoch timestamps, long
names, deep and same-time op nesting, nested nn.Module frames, gzip bombs, metadata storms,
identical ops, empty events). Every case is staged through `stage_trace`, which must
return or raise a TraceLakeError, never anything else. A sample of the cases goes through the real
CLI one by one (exit 0 or 2, one line on stderr for 2, never a traceback), then a few more staged
cases of each class go in as one folder; the warehouse must then hold every committed trace's rows
and pass `tracelake build`'s data tests.
"""

from __future__ import annotations

import contextlib
import copy
import gzip
import hashlib
import io
import json
import random
import re
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import TRACES
from tests.ingest.probe_cases import GZIP_CLASSES, PROBE_CLASSES, _dicts, _dump, _events
from tracelake.cli import main
from tracelake.core.errors import TraceLakeError
from tracelake.ingest.trace_ingest import stage_trace
from tracelake.lakehouse import open_warehouse

SEED = 20261201
CASES_PER_CLASS_PER_SOURCE = 3
CLI_SAMPLE_CASES = 34  # cases ingested one by one through the CLI: one of each of the 28 classes, then refused ones
# Staged cases ingested as one folder after them, a few of each class: `tracelake build` over the
# warehouse costs ~30 s plus ~0.25 s per trace, so not all ~200 go in.
BATCH_CASES_PER_CLASS = 3
SOURCES = (
    "torch_compile_triton/trace.json.gz",
    "cpu_only/cpu_mlp_training.json.gz",
    "h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "mi210/gpu_only_trace/gpu_only_trace.json.gz",
    "inference/vllm_decode_full/graph_execution.json.gz",
)
EVENT_FIELDS = ("ph", "cat", "name", "ts", "dur", "pid", "tid", "id", "args", "bp", "s")
ARG_FIELDS = ("correlation", "External id", "device", "stream", "bytes", "kind", "grid", "block", "Input Dims",
              "Input type", "Concrete Inputs", "Sequence number", "Fwd thread id", "Record function id", "name")
ANY_VALUES: tuple[Any, ...] = (None, True, False, 0, -1, 1.5, "x", "", "12", "0x1f", [], [1, "a"], {}, {"a": 1})
HUGE_NUMBERS: tuple[Any, ...] = (2**63, 2**64, -(2**63) - 1, -(2**70), 10**30, -(10**30), 10**400, -(10**400),
                                 2**1024, 1e308, -1e308, 5e-324)
HOSTILE_STRINGS = (
    "<script>alert(1)</script>", '"; drop table events; --', "a\nb\rc\td", "\x00nul\x00", "\u202eRTL\u202c",
    "\U0001f600" * 50, "x" * 100_000, "\ud800lone", "\udc00low", "'", "\\", "{{ jinja }}", "{% raw %}", "%s%n%x",
    "\ufeffbom", "nn.Module: <script>", "aten::mm\x7f", "",
)


@dataclass
class Case:
    label: str  # "<class>-<n>"
    mutation: str
    source: str
    data: bytes
    suffix: str = ".json"


def _pick(rng: random.Random, items: list[Any], count: int) -> list[Any]:
    return rng.sample(items, min(count, len(items))) if items else []


# ---- mutations: (rng, parsed source, source bytes) -> file bytes ----

def byte_flips(rng: random.Random, doc: Any, raw: bytes) -> bytes:
    data = bytearray(raw)
    for _ in range(rng.randint(1, 16)):
        data[rng.randrange(len(data))] ^= rng.randint(1, 255)
    return bytes(data)


def truncation(rng: random.Random, doc: Any, raw: bytes) -> bytes:
    return raw[: rng.randint(1, len(raw) - 1)]


def type_swaps(rng: random.Random, doc: Any, raw: bytes) -> bytes:
    for event in _pick(rng, _dicts(doc), rng.randint(1, 40)):
        if rng.random() < 0.5 or not isinstance(event.get("args"), dict):
            event[rng.choice(EVENT_FIELDS)] = copy.deepcopy(rng.choice(ANY_VALUES))
        else:
            event["args"][rng.choice(ARG_FIELDS)] = copy.deepcopy(rng.choice(ANY_VALUES))
    return _dump(doc)


def field_deletions(rng: random.Random, doc: Any, raw: bytes) -> bytes:
    for event in _pick(rng, _dicts(doc), rng.randint(1, 60)):
        for key in _pick(rng, list(event), rng.randint(1, 3)):
            del event[key]
    if rng.random() < 0.3:
        for key in _pick(rng, [k for k in doc if k != "traceEvents"], 2):
            del doc[key]
    return _dump(doc)


def huge_numbers(rng: random.Random, doc: Any, raw: bytes) -> bytes:
    for event in _pick(rng, _dicts(doc), rng.randint(1, 20)):
        value = rng.choice(HUGE_NUMBERS)
        target = event.get("args") if isinstance(event.get("args"), dict) and rng.random() < 0.4 else event
        target[rng.choice(("ts", "dur", "pid", "tid", "id") if target is event else ARG_FIELDS)] = value
    if rng.random() < 0.3:
        doc["baseTimeNanoseconds"] = rng.choice(HUGE_NUMBERS)
    return _dump(doc)


def negative_numbers(rng: random.Random, doc: Any, raw: bytes) -> bytes:
    for event in _pick(rng, _dicts(doc), rng.randint(1, 30)):
        field = rng.choice(("ts", "dur"))
        if isinstance(event.get(field), (int, float)):
            event[field] = -abs(event[field]) - rng.choice((0, 1, 1e6, 1e15))
    return _dump(doc)


def non_finite(rng: random.Random, doc: Any, raw: bytes) -> bytes:
    for event in _pick(rng, _dicts(doc), rng.randint(1, 20)):
        value = rng.choice((float("nan"), float("inf"), float("-inf")))
        if isinstance(event.get("args"), dict) and rng.random() < 0.3:
            event["args"][rng.choice(ARG_FIELDS)] = value
        else:
            event[rng.choice(("ts", "dur", "pid", "id"))] = value
    if rng.random() < 0.3:
        doc["nanMetadata"] = float("nan")
    data = _dump(doc)
    literal = rng.choice((b"1e999", b"-1e999", b"nan", b"-inf"))
    return re.sub(rb'("dur": )[0-9.]+', lambda m: m.group(1) + literal if rng.random() < 0.02 else m.group(0), data)


def deep_nesting(rng: random.Random, doc: Any, raw: bytes) -> bytes:
    depth = rng.choice((100, 999, 1000, 5000, 10_000, 50_000))
    opening, closing = rng.choice(((b"[", b"]"), (b'{"a":', b"}")))
    nested = opening * depth + b"1" + closing * depth
    where = rng.choice(("args", "metadata", "event"))
    events = _dicts(doc)
    if where == "args" and events:
        rng.choice(events).setdefault("args", {})["deep"] = "__DEEP__"
    elif where == "event":
        _events(doc).insert(rng.randint(0, len(_events(doc))), "__DEEP__")
    else:
        doc["deepMetadata"] = "__DEEP__"
    return _dump(doc).replace(b'"__DEEP__"', nested)


def hostile_strings(rng: random.Random, doc: Any, raw: bytes) -> bytes:
    for event in _pick(rng, _dicts(doc), rng.randint(1, 20)):
        text = rng.choice(HOSTILE_STRINGS)
        if isinstance(event.get("args"), dict) and rng.random() < 0.3:
            event["args"][rng.choice(("kind", "name", "Input type", text[:20] or "k"))] = text
        else:
            event[rng.choice(("name", "cat", "pid", "tid"))] = text
    data = _dump(doc)
    if rng.random() < 0.5:  # raw bytes JSON does not allow as written: control characters, bad UTF-8
        spots = [m.end() - 1 for m in re.finditer(rb'"name": "[^"\\]{3,}"', data)]
        for spot in _pick(rng, spots, rng.randint(1, 10)):
            data = data[:spot] + rng.choice((b"\x01", b"\n", b"\t", b"\xff", b"\xc3\x28", b"\xed\xa0\x80")) + data[spot:]
    return data


def dangling_flows(rng: random.Random, doc: Any, raw: bytes) -> bytes:
    events = _events(doc)
    timed = [e for e in _dicts(doc) if isinstance(e.get("ts"), (int, float))]
    for _ in range(rng.randint(1, 30)):
        base = rng.choice(timed) if timed else {"ts": 1.0, "pid": 1, "tid": 1}
        flow = {"ph": rng.choice(("s", "f", "t")), "cat": rng.choice(("ac2g", "fwdbwd", "x")), "name": "flow",
                "id": rng.choice((rng.randint(10**8, 10**9), "dangling", -1, 0)), "ts": base["ts"],
                "pid": base.get("pid"), "tid": base.get("tid")}
        if rng.random() < 0.5:
            flow["bp"] = "e"
        events.insert(rng.randint(0, len(events)), flow)
    for event in _pick(rng, [e for e in _dicts(doc) if isinstance(e.get("args"), dict)], 20):
        event["args"]["correlation"] = rng.choice((999_999_999, 1, event["args"].get("correlation")))
    return _dump(doc)


def out_of_order(rng: random.Random, doc: Any, raw: bytes) -> bytes:
    events = _events(doc)
    if rng.random() < 0.5:
        rng.shuffle(events)
    else:
        timed = [e for e in _dicts(doc) if "ts" in e]
        for a, b in zip(_pick(rng, timed, 40), _pick(rng, timed, 40)):
            a["ts"], b["ts"] = b["ts"], a["ts"]
    return _dump(doc)


def bad_metadata(rng: random.Random, doc: Any, raw: bytes) -> bytes:
    doc["distributedInfo"] = rng.choice((
        {"backend": "nccl", "rank": rng.choice((True, "0", -1, 2**31, 2**70, None, 1.5)),
         "world_size": rng.choice((0, -5, 2**31, "8", [8], 8, 2**64))},
        {"backend": rng.choice((5, {"a": 1}, None, "x" * 10_000)), "rank": 0, "world_size": 1},
        [], "nccl", 5, None,
    ))
    doc["deviceProperties"] = rng.choice(({}, "x", [1, None, {"name": 5}], [{"name": {"a": [1]}}], 7))
    doc[rng.choice(("cuda_runtime_version", "hip_runtime_version", "cupti_version"))] = rng.choice(({"a": [1]}, [], 1e308, True))
    doc["environment"] = {"HF_TOKEN": "hf_" + "a" * 34, "AWS_SECRET_ACCESS_KEY": "x" * 40, "PATH": "/usr/bin",
                          "note": "Bearer abcdefghijklmnop"}
    return _dump(doc)


def impossible_times(rng: random.Random, doc: Any, raw: bytes) -> bytes:
    events = _dicts(doc)
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")] or events
    share = rng.choice((1, 5, len(gpu)))  # one kernel, a few, or all of them
    for event in _pick(rng, gpu, share):
        if isinstance(event.get("ts"), (int, float)):
            event["ts"] += rng.choice((1e15, 1e18, -1e15, 3.6e9))
    for event in _pick(rng, events, rng.randint(0, 5)):
        if event.get("ph") == "X":
            event["dur"] = rng.choice((1e15, 1e12, 2**62))
    return _dump(doc)


def broken_structure(rng: random.Random, doc: Any, raw: bytes) -> bytes:
    choice = rng.randrange(10)
    if choice == 0:
        doc["traceEvents"] = rng.choice(({}, "x", None, 5, [[1, 2]], [1, 2, 3], [None]))
    elif choice == 1:
        return _dump(_events(doc)[:50])  # a bare event list
    elif choice == 2:
        return rng.choice((b"", b"   \n", b"null", b'"trace"', b"{}", b"[]", b"\x00" * 100))
    elif choice == 3:
        return _dump(doc)[:-1] + b', "traceEvents": []}'  # a duplicate key: the last one wins
    elif choice == 4:
        return b"\xef\xbb\xbf" + _dump(doc)  # a byte-order mark
    elif choice == 5:
        return _dump(doc) + rng.choice((b"garbage", b"{}", b"\x00"))
    elif choice == 6:
        return _dump(doc) + _dump(doc)  # two documents
    elif choice == 7:
        doc["traceEvents"] = [e for e in _events(doc) if isinstance(e, dict) and e.get("ph") == "M"]
    elif choice == 8:
        for key in ("traceEvents", "deviceProperties"):
            doc.pop(key, None)
    else:
        doc["traceEvents"] = [{"ph": "X", "name": "only", "ts": 1, "dur": 1}]
    return _dump(doc)


def duplicates(rng: random.Random, doc: Any, raw: bytes) -> bytes:
    events = _events(doc)
    for event in _pick(rng, _dicts(doc), rng.randint(1, 50)):
        for _ in range(rng.randint(1, 3)):
            events.insert(rng.randint(0, len(events)), copy.deepcopy(event))
    return _dump(doc)


MUTATIONS: dict[str, Callable[[random.Random, Any, bytes], bytes]] = {
    f.__name__: f for f in (byte_flips, truncation, type_swaps, field_deletions, huge_numbers, negative_numbers,
                            non_finite, deep_nesting, hostile_strings, dangling_flows, out_of_order, bad_metadata,
                            impossible_times, broken_structure, duplicates)
}
STRUCTURAL = {"type_swaps", "field_deletions", "huge_numbers", "negative_numbers", "non_finite", "hostile_strings",
              "dangling_flows", "out_of_order", "bad_metadata", "impossible_times", "duplicates"}


def combined(rng: random.Random, doc: Any, raw: bytes) -> bytes:
    """Several structural mutations on one trace (until one leaves JSON that Python cannot parse)."""
    data = raw
    for name in rng.sample(sorted(STRUCTURAL), 3):
        data = MUTATIONS[name](rng, doc, data)
        try:
            doc = json.loads(data)
        except ValueError:
            break
    return data


MUTATIONS["combined"] = combined
# The reliability probe's classes (issue 27), at small seeded sizes; test_resource_limits.py runs
# them at the probe's sizes under a memory limit.
MUTATIONS.update(PROBE_CLASSES)


def make_cases() -> list[Case]:
    rng = random.Random(SEED)
    sources = {name: gzip.decompress((TRACES / name).read_bytes()) for name in SOURCES}
    cases: list[Case] = []
    for mutation, mutate in MUTATIONS.items():
        for source, raw in sources.items():
            for _ in range(CASES_PER_CLASS_PER_SOURCE):
                data = mutate(rng, json.loads(raw), raw)
                suffix = ".json"
                if mutation in GZIP_CLASSES:
                    suffix = ".json.gz"
                elif rng.random() < 0.25:  # some as .gz, some of those cut short after compressing
                    data = gzip.compress(data, compresslevel=1)
                    suffix = ".json.gz"
                    if mutation == "truncation":
                        data = data[: rng.randint(10, len(data) - 1)]
                cases.append(Case(f"{mutation}-{len(cases)}", mutation, source, data, suffix))
    return cases


# ---- the fuzz run ----

@dataclass
class Outcome:
    case: Case
    path: Path
    staged: bool
    gpu_ops: int = 0
    message: str = ""


@pytest.fixture(scope="module")
def fuzz_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("fuzz")
    started = time.perf_counter()
    cases = make_cases()
    outcomes: list[Outcome] = []
    crashes: list[str] = []
    for case in cases:
        path = root / "cases" / f"{case.label}{case.suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(case.data)
        staging = root / "staging" / case.label
        try:
            stage_trace(path, hashlib.sha256(case.data).hexdigest(), staging, {}, "fuzz")
            gpu_ops = pq.read_metadata(staging / "gpu_ops" / "part-0.parquet").num_rows
            outcomes.append(Outcome(case, path, True, gpu_ops))
        except TraceLakeError as exc:
            assert "\n" not in str(exc), (case.label, str(exc))
            outcomes.append(Outcome(case, path, False, message=str(exc)))
        except BaseException as exc:  # noqa: BLE001 - every crash is collected and reported below
            crashes.append(f"{case.label} ({case.source}): {type(exc).__name__}: {exc}"[:300])
        shutil.rmtree(staging, ignore_errors=True)
    staged_seconds = time.perf_counter() - started
    return {"root": root, "cases": cases, "outcomes": outcomes, "crashes": crashes, "staged_seconds": staged_seconds}


def test_staging_never_crashes(fuzz_run: dict[str, Any]) -> None:
    cases: list[Case] = fuzz_run["cases"]
    outcomes: list[Outcome] = fuzz_run["outcomes"]
    assert not fuzz_run["crashes"], "\n".join(fuzz_run["crashes"])
    assert len(cases) >= 200
    per_class = Counter(c.mutation for c in cases)
    assert set(per_class) == set(MUTATIONS) and min(per_class.values()) >= 10
    staged = Counter(o.case.mutation for o in outcomes if o.staged)
    print(f"\nfuzz: {len(cases)} cases in {len(per_class)} classes, {sum(staged.values())} staged, "
          f"{len(outcomes) - sum(staged.values())} refused, {fuzz_run['staged_seconds']:.1f} s; staged per class: "
          + ", ".join(f"{k}={staged[k]}/{per_class[k]}" for k in per_class))
    # the mutations that keep the JSON whole must mostly be read, not refused
    for mutation in STRUCTURAL - {"bad_metadata"}:
        assert staged[mutation] >= per_class[mutation] // 2, mutation
    assert staged["bad_metadata"] == per_class["bad_metadata"]  # a bad optional field never refuses a trace
    assert staged["deep_nesting"] == per_class["deep_nesting"]


def _cli(args: list[str]) -> tuple[int, str]:
    """Run the CLI in this process: its exit code and what it wrote to stderr."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(args)
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
    return code, stderr.getvalue()


@pytest.fixture(scope="module", params=["classic", "lakehouse"])
def fuzz_warehouse(fuzz_run: dict[str, Any], tmp_path_factory: pytest.TempPathFactory,
                   request: pytest.FixtureRequest) -> dict[str, Any]:
    """A sample of the cases ingested one by one through the CLI, then a few more staged cases
    of each class as one folder, into one warehouse of each layout."""
    outcomes: list[Outcome] = fuzz_run["outcomes"]
    warehouse = tmp_path_factory.mktemp("fuzz_wh")
    layout = ["--catalog", "classic"] if request.param == "classic" else []
    rng = random.Random(SEED)
    by_class: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        by_class.setdefault(outcome.case.mutation, []).append(outcome)
    sample = [rng.choice([o for o in group if o.staged] or group) for group in by_class.values()]
    rest = [o for o in outcomes if o not in sample]
    sample += _pick(rng, [o for o in rest if not o.staged], CLI_SAMPLE_CASES - len(sample))
    runs = [(o, *_cli(["ingest", str(o.path), "--warehouse", str(warehouse), "--quiet", "--jobs", "1", *layout]))
            for o in sample]
    folder = fuzz_run["root"] / f"batch_{request.param}"
    folder.mkdir()
    batch = [o for group in by_class.values()
             for o in _pick(rng, [o for o in group if o.staged and o not in sample], BATCH_CASES_PER_CLASS)]
    for outcome in batch:
        shutil.copy(outcome.path, folder / outcome.path.name)
    batch_code, batch_stderr = _cli(["ingest", str(folder), "--warehouse", str(warehouse), "--quiet", "--jobs", "2",
                                     *layout])
    return {"warehouse": warehouse, "runs": runs, "batch": batch, "batch_exit": (batch_code, batch_stderr)}


def _assert_clean_exit(label: str, code: int, stderr: str) -> None:
    assert code in (0, 2), (label, code, stderr)
    assert "Traceback" not in stderr and "internal error" not in stderr, (label, stderr)
    if code == 2:
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("tracelake: error:"), (label, stderr)


def test_cli_ingest_exits_0_or_2_with_one_line(fuzz_warehouse: dict[str, Any]) -> None:
    codes: Counter[int] = Counter()
    for outcome, code, stderr in fuzz_warehouse["runs"]:
        _assert_clean_exit(outcome.case.label, code, stderr)
        assert code == (0 if outcome.staged else 2), (outcome.case.label, code, stderr, outcome.message)
        codes[code] += 1
    code, stderr = fuzz_warehouse["batch_exit"]
    _assert_clean_exit("batch", code, stderr)
    assert code == 0, stderr
    print(f"\nfuzz CLI: {len(fuzz_warehouse['runs'])} cases one by one (exit codes {dict(codes)}), "
          f"{len(fuzz_warehouse['batch'])} as one folder")


def test_every_committed_trace_has_its_rows(fuzz_run: dict[str, Any], fuzz_warehouse: dict[str, Any]) -> None:
    warehouse = fuzz_warehouse["warehouse"]
    ingested = [o for o, _, _ in fuzz_warehouse["runs"]] + fuzz_warehouse["batch"]
    committed = {hashlib.sha256(o.case.data).hexdigest()[:16]: o for o in ingested if o.staged}
    code, stderr = _cli(["traces", "--warehouse", str(warehouse), "--format", "json"])
    assert code == 0, stderr
    with open_warehouse(warehouse).connect_read_only() as db:
        rows = db.execute("""
            select t.trace_id, t.event_count,
                   (select count(*) from events e where e.trace_id = t.trace_id) as events,
                   (select count(*) from kernels k where k.trace_id = t.trace_id) as kernels,
                   (select count(*) from gpu_timeline_all_events g where g.trace_id = t.trace_id) as timelines,
                   (select count(*) from trace_quality q where q.trace_id = t.trace_id) as checks,
                   (select max(total_time_ms) from gpu_timeline_all_events g where g.trace_id = t.trace_id) as total_ms
            from traces t""").fetchall()
    assert {row[0] for row in rows} == set(committed)
    for trace_id, event_count, events, kernels, timelines, checks, total_ms in rows:
        label = committed[trace_id].case.label
        assert events == event_count, label
        assert kernels == committed[trace_id].gpu_ops, label
        assert timelines == (1 if kernels else 0), label
        assert checks >= 14, label
        assert total_ms is None or total_ms < 3.6e6, (label, total_ms)  # never the 1e12 ms of an outlier


@pytest.mark.parametrize("fuzz_warehouse", ["classic"], indirect=True)  # dbt's data tests run on the classic file
def test_fuzzed_warehouse_passes_the_data_tests(fuzz_warehouse: dict[str, Any]) -> None:
    code, stderr = _cli(["build", "--warehouse", str(fuzz_warehouse["warehouse"])])
    assert code == 0, stderr
