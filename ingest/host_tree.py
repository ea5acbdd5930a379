"""Rebuild the host call tree per (pid, tid) from timestamps, as TraceLens' TraceToTree does.

Events are visited thread by thread in start order (at one start the longer first, as it encloses
the shorter; full ties keep file order). A stack holds the
thread's open events; an event nests under the top of the stack. When an event ends after the
top, an overlap below the bleed tolerance is read as a finished sibling (the top is closed),
anything larger drops the event from the tree. A cpu op (an `nn.Module` frame) that would open
inside MAX_HOST_OP_NESTING others, or any event below MAX_HOST_TREE_DEPTH, is left out of the tree
too (it stays in `events`): the per-op ancestor lists downstream (module chains, op ancestry,
module call stacks) then stay bounded, where the probe's 20,000 nested ops made them grow with the
square of the depth. Events with the same start and end nest in file order, as in TraceLens, so
those limits bound them too. The walk is sequential by nature, so it runs once, over plain lists; everything that can
be is computed with vectorized masks first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracelake.ingest.limits import MAX_HOST_OP_NESTING, MAX_HOST_TREE_DEPTH

# TraceLens TraceToTree: a launch that starts < 1 us before its sibling ends is still a sibling.
BLEED_TOLERANCE_US = 1.0
# TraceLens: a cpu_op named exactly "execute" is a pass-through wrapper when finding launchers.
PASS_THROUGH_OP = "execute"
BACKWARD_OP_PREFIX = "autograd::engine::evaluate_function:"
MODULE_FRAME_PREFIX = "nn.Module: "
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver")
NO_MODULE = ("root",)

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


def _flags(host: pa.Table) -> dict[str, list[bool]]:
    cat, name = host["cat"], host["name"]
    is_cpu_op = pc.equal(cat, "cpu_op")
    is_python = pc.equal(cat, "python_function")

    def as_list(mask: pa.ChunkedArray) -> list[bool]:
        return pc.fill_null(mask, False).to_pylist()

    return {
        "cpu_op": as_list(is_cpu_op),
        "module": as_list(pc.and_(is_python, pc.starts_with(name, MODULE_FRAME_PREFIX))),
        "runtime": as_list(pc.is_in(cat, pa.array(RUNTIME_CATEGORIES))),
        "skipped": as_list(pc.or_(is_python, pc.and_(is_cpu_op, pc.equal(name, PASS_THROUGH_OP)))),
        "backward_op": as_list(pc.and_(is_cpu_op, pc.starts_with(name, BACKWARD_OP_PREFIX))),
    }


def _module_labels(host: pa.Table) -> list[str | None]:
    """`nn.Module: Linear_3` -> `Linear` (TraceLens strips the instance suffix)."""
    label = pc.replace_substring_regex(host["name"], r"^nn\.Module: (.*?)(_\d+)?$", r"\1")
    return label.to_pylist()


@dataclass(frozen=True)
class HostTree:
    """The host events with the tree columns of TREE_SCHEMA, and how many were left out of the
    tree because they nest too deep (ingest/limits.py)."""

    host: pa.Table
    too_deep_events: int


def build_host_tree(host: pa.Table) -> HostTree:
    """Append the tree columns of TREE_SCHEMA to `host` (one row per host event)."""
    n = host.num_rows
    uid = host["event_idx"].to_numpy()
    starts_np = host["ts"].to_numpy()
    ends_np = starts_np + host["dur"].to_numpy()
    thread_key = pc.binary_join_element_wise(
        pc.fill_null(host["pid"], ""), pc.fill_null(host["tid"], ""), "\x00"
    )
    thread = pc.dictionary_encode(thread_key).combine_chunks().indices.to_numpy()
    # at one start the longer event opens first: it encloses the other, which ends inside it
    order = np.lexsort((uid, -ends_np, starts_np, thread)).tolist()
    thread_of = thread.tolist()
    ends = ends_np.tolist()
    starts = starts_np.tolist()
    flags = _flags(host)
    is_cpu_op, is_module = flags["cpu_op"], flags["module"]
    labels = _module_labels(host)

    in_tree = [False] * n
    parent = [-1] * n
    depth = [0] * n
    is_root = [False] * n
    module_chain: list[tuple[str, ...] | None] = [None] * n
    current_thread = -1
    stack: list[int] = []
    modules: list[str] = []
    open_cpu_ops = 0
    too_deep = 0

    for row in order:
        if thread_of[row] != current_thread:
            current_thread, stack, modules, open_cpu_ops = thread_of[row], [], [], 0
        start, end = starts[row], ends[row]
        while stack and start >= ends[stack[-1]]:
            top = stack.pop()
            if is_cpu_op[top]:
                open_cpu_ops -= 1
            elif is_module[top]:
                modules.pop()
        if stack and end > ends[stack[-1]]:
            if ends[stack[-1]] - start < BLEED_TOLERANCE_US and len(stack) >= 2:
                top = stack.pop()
                if is_cpu_op[top]:
                    open_cpu_ops -= 1
                elif is_module[top]:
                    modules.pop()
            else:
                continue
        if len(stack) >= MAX_HOST_TREE_DEPTH or (is_cpu_op[row] and open_cpu_ops >= MAX_HOST_OP_NESTING) or (
            is_module[row] and len(modules) >= MAX_HOST_OP_NESTING
        ):
            too_deep += 1
            continue
        in_tree[row] = True
        if stack:
            parent[row] = stack[-1]
            depth[row] = depth[stack[-1]] + 1
        stack.append(row)
        if is_cpu_op[row]:
            module_chain[row] = tuple(modules) if modules else NO_MODULE
            is_root[row] = open_cpu_ops == 0
            open_cpu_ops += 1
        elif is_module[row]:
            modules.append(labels[row])

    cpu_parent, cpu_depth, launcher, backward = _derive_ancestors(order, in_tree, parent, flags)
    uid_list = uid.tolist()
    columns = [
        pa.array(in_tree, pa.bool_()),
        _row_to_uid(parent, uid_list),
        pa.array(depth, pa.int32()),
        _row_to_uid(cpu_parent, uid_list),
        pa.array(cpu_depth, pa.int32()),
        pa.array(is_root, pa.bool_()),
        _row_to_uid(launcher, uid_list),
        pa.array(backward, pa.bool_()),
        pa.array(module_chain, pa.list_(pa.string())),
    ]
    for spec, column in zip(TREE_SCHEMA, columns):
        host = host.append_column(spec, column)
    return HostTree(host, too_deep)


def _derive_ancestors(
    order: list[int], in_tree: list[bool], parent: list[int], flags: dict[str, list[bool]]
) -> tuple[list[int], list[int], list[int], list[bool]]:
    """Per-row facts that follow from the parent chain; parents are visited before children.

    The launcher of a runtime call is TraceLens' leaf cpu op: walking up, python frames and
    pass-through `execute` ops are skipped; the first other event must be a cpu op.
    """
    n = len(parent)
    is_cpu_op, is_runtime, skipped, backward_op = (
        flags["cpu_op"], flags["runtime"], flags["skipped"], flags["backward_op"]
    )
    nearest_cpu_op = [-1] * n
    nearest_stop = [-1] * n
    cpu_parent = [-1] * n
    cpu_depth = [0] * n
    launcher = [-1] * n
    backward = [False] * n
    for row in order:
        if not in_tree[row]:
            continue
        up = parent[row]
        if up >= 0:
            cpu_parent[row] = nearest_cpu_op[up]
            backward[row] = backward[up] or backward_op[row]
            if cpu_parent[row] >= 0:
                cpu_depth[row] = cpu_depth[cpu_parent[row]] + 1
            nearest_stop[row] = nearest_stop[up] if skipped[row] else row
            if is_runtime[row]:
                stop = nearest_stop[up]
                if stop >= 0 and is_cpu_op[stop]:
                    launcher[row] = stop
        else:
            backward[row] = backward_op[row]
            nearest_stop[row] = -1 if skipped[row] else row
        nearest_cpu_op[row] = row if is_cpu_op[row] else cpu_parent[row]
    return cpu_parent, cpu_depth, launcher, backward


def _row_to_uid(rows: list[int], uid: list[int]) -> pa.Array:
    return pa.array([uid[r] if r >= 0 else None for r in rows], pa.int64())
