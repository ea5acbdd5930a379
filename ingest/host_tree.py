"""Rebuild the host call tree per (pid, tid) from timestamps, as TraceLens' TraceToTree does.

Events are visited in start order (ties keep file order). A stack per thread holds the open
events; an event nests under the top of its thread's stack. When an event ends after the top,
an overlap below the bleed tolerance is read as a finished sibling (the top is closed), anything
larger drops the event from the tree. The walk is sequential by nature, so it runs once, over
plain lists, on the host subset only.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

# TraceLens TraceToTree: a launch that starts < 1 us before its sibling ends is still a sibling.
BLEED_TOLERANCE_US = 1.0
# TraceLens: a cpu_op named exactly "execute" is a pass-through wrapper when finding launchers.
PASS_THROUGH_OP = "execute"
BACKWARD_OP_PREFIX = "autograd::engine::evaluate_function:"
MODULE_FRAME_PREFIX = "nn.Module: "
_MODULE_SUFFIX = re.compile(r"_\d+$")

TREE_SCHEMA = pa.schema(
    [
        ("in_tree", pa.bool_()),
        ("parent_idx", pa.int64()),
        ("depth", pa.int32()),
        ("cpu_parent_idx", pa.int64()),
        ("cpu_depth", pa.int32()),
        ("is_cpu_root", pa.bool_()),
        ("launcher_op_idx", pa.int64()),
        ("is_backward", pa.bool_()),
        ("module_chain", pa.list_(pa.string())),
    ]
)


def build_host_tree(host: pa.Table) -> pa.Table:
    """Return `host` with the tree columns of TREE_SCHEMA appended (one row per host event)."""
    n = host.num_rows
    uid = host.column("event_idx").to_pylist()
    cats = host.column("cat").to_pylist()
    names = host.column("name").to_pylist()
    starts_np = host.column("ts").to_numpy()
    ends_np = starts_np + host.column("dur").to_numpy()
    starts = starts_np.tolist()
    ends = ends_np.tolist()
    threads = list(zip(host.column("pid").to_pylist(), host.column("tid").to_pylist()))
    order = np.lexsort((np.asarray(uid), starts_np)).tolist()

    in_tree = [False] * n
    parent: list[int] = [-1] * n
    depth = [0] * n
    is_root = [False] * n
    module_chain: list[tuple[str, ...] | None] = [None] * n
    stacks: dict[tuple[str | None, str | None], list[int]] = {}
    cpu_open: dict[tuple[str | None, str | None], int] = {}
    modules: dict[tuple[str | None, str | None], list[str]] = {}

    def close(row: int, thread: tuple[str | None, str | None]) -> None:
        if cats[row] == "cpu_op":
            cpu_open[thread] -= 1
        elif cats[row] == "python_function" and names[row].startswith(MODULE_FRAME_PREFIX):
            modules[thread].pop()

    for row in order:
        thread = threads[row]
        stack = stacks.setdefault(thread, [])
        cpu_open.setdefault(thread, 0)
        module_stack = modules.setdefault(thread, [])
        start, end = starts[row], ends[row]
        while stack and start >= ends[stack[-1]]:
            close(stack.pop(), thread)
        if stack and end > ends[stack[-1]]:
            top = stack[-1]
            if ends[top] - start < BLEED_TOLERANCE_US and len(stack) >= 2:
                close(stack.pop(), thread)
            else:
                continue
        in_tree[row] = True
        if stack:
            parent[row] = stack[-1]
            depth[row] = depth[stack[-1]] + 1
        stack.append(row)
        cat = cats[row]
        if cat == "cpu_op":
            module_chain[row] = tuple(module_stack) if module_stack else ("root",)
            if cpu_open[thread] == 0:
                is_root[row] = True
            cpu_open[thread] += 1
        elif cat == "python_function" and names[row].startswith(MODULE_FRAME_PREFIX):
            module_stack.append(_MODULE_SUFFIX.sub("", names[row][len(MODULE_FRAME_PREFIX) :]))

    derived = _derive_ancestors(order, in_tree, parent, cats, names)
    cpu_parent, cpu_depth, launcher, backward = derived
    columns = [
        pa.array(in_tree, pa.bool_()),
        _row_to_uid(parent, uid),
        pa.array(depth, pa.int32()),
        _row_to_uid(cpu_parent, uid),
        pa.array(cpu_depth, pa.int32()),
        pa.array(is_root, pa.bool_()),
        _row_to_uid(launcher, uid),
        pa.array(backward, pa.bool_()),
        pa.array([list(c) if c is not None else None for c in module_chain], pa.list_(pa.string())),
    ]
    for spec, column in zip(TREE_SCHEMA, columns):
        host = host.append_column(spec, column)
    return host


def _derive_ancestors(
    order: list[int], in_tree: list[bool], parent: list[int], cats: list[str], names: list[str]
) -> tuple[list[int], list[int], list[int], list[bool]]:
    """Per-row facts that follow from the parent chain; parents are visited before children."""
    n = len(parent)
    nearest_cpu_op = [-1] * n  # self if cpu_op, else nearest cpu_op ancestor
    nearest_stop = [-1] * n  # self unless python frame or pass-through op, else the parent's
    cpu_parent = [-1] * n
    cpu_depth = [0] * n
    launcher = [-1] * n
    backward = [False] * n
    for row in order:
        if not in_tree[row]:
            continue
        up = parent[row]
        cat = cats[row]
        is_cpu_op = cat == "cpu_op"
        if up >= 0:
            cpu_parent[row] = nearest_cpu_op[up]
            backward[row] = backward[up]
        if cpu_parent[row] >= 0:
            cpu_depth[row] = cpu_depth[cpu_parent[row]] + 1
        nearest_cpu_op[row] = row if is_cpu_op else cpu_parent[row]
        skipped = cat == "python_function" or (is_cpu_op and names[row] == PASS_THROUGH_OP)
        nearest_stop[row] = (nearest_stop[up] if up >= 0 else -1) if skipped else row
        if is_cpu_op and names[row].startswith(BACKWARD_OP_PREFIX):
            backward[row] = True
        if cat in ("cuda_runtime", "cuda_driver") and up >= 0:
            stop = nearest_stop[up]
            if stop >= 0 and cats[stop] == "cpu_op":
                launcher[row] = stop
    return cpu_parent, cpu_depth, launcher, backward


def _row_to_uid(rows: list[int], uid: list[int]) -> pa.Array:
    return pa.array([uid[r] if r >= 0 else None for r in rows], pa.int64())
