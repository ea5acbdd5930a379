"""Instances: runs of units one fused kernel could replace, found in this order, each unit in at
most one instance (`covered` holds the keys already taken):

1. eager attention: a batched matmul, a softmax and a second batched matmul issued in the same
   module (or under the same parent op);
2. module instances: the innermost nn.Module call whose kernels number 2..FUSION_MAX_KERNELS
   (a module with more kernels contributes its runs of consecutive non-GEMM ops instead);
3. op subtrees: for kernels outside any module, the outermost cpu op whose subtree launches
   2..FUSION_MAX_KERNELS kernels.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import duckdb

from tracelake.analyzers import settings
from tracelake.analyzers.fusion_units import Instance, OpTable, Unit, kernel_count, load_ancestry, module_chain

BMM_OPS = {"aten::bmm", "aten::matmul", "aten::baddbmm", "aten::einsum"}
SOFTMAX_OPS = {"aten::_softmax", "aten::softmax", "aten::_safe_softmax", "aten::log_softmax", "aten::_log_softmax"}


def _is_batched_matmul(unit: Unit) -> bool:
    return unit.name in BMM_OPS and unit.is_matrix


def _attention_window(seq: list[Unit], start: int) -> int | None:
    """Where the second batched matmul of a bmm -> (scale / mask) -> softmax -> (dropout) -> bmm
    window opened at `start` sits, or None when there is no such window."""
    softmax_end = min(len(seq), start + 2 + settings.ATTENTION_MAX_OPS_BEFORE_SOFTMAX)
    softmax_at = next((j for j in range(start + 1, softmax_end)
                       if seq[j].name in SOFTMAX_OPS or "softmax" in seq[j].types), None)
    if softmax_at is None:
        return None
    second_end = min(len(seq), softmax_at + 2 + settings.ATTENTION_MAX_OPS_AFTER_SOFTMAX)
    return next((j for j in range(softmax_at + 1, second_end) if _is_batched_matmul(seq[j])), None)


def eager_attention(units: list[Unit], ops: OpTable, covered: set[str]) -> list[Instance]:
    """bmm -> (scale / mask) -> softmax -> (dropout) -> bmm issued in one module / under one parent."""

    def container(u: Unit) -> tuple[str, Any]:
        if u.module_id is not None:
            return ("module", u.module_id)
        return ("parent", (ops.get(u.op_id) or {}).get("parent_id"))

    sequences: dict[tuple[str, Any], list[Unit]] = defaultdict(list)
    for u in units:
        sequences[container(u)].append(u)
    found: list[Instance] = []
    for seq in sequences.values():
        i = 0
        while i < len(seq):
            first = seq[i]
            second_at = None if not _is_batched_matmul(first) or first.key in covered else _attention_window(seq, i)
            window = [] if second_at is None else seq[i:second_at + 1]
            if not window or any(u.key in covered or u.is_fused for u in window):
                i += 1
                continue
            first_op = ops.get(first.op_id) or {}
            chain = module_chain(first_op)
            scope = chain[-1] if chain else (ops.get(first_op.get("parent_id")) or {}).get("name", "top level")
            found.append(Instance("eager_attention", scope, window, chain))
            covered.update(u.key for u in window)
            i += len(window)
    return found


def chains(pool: list[Unit]) -> list[list[Unit]]:
    """Runs of consecutive non-GEMM, not-yet-fused ops of at least two kernels."""
    runs: list[list[Unit]] = []
    run: list[Unit] = []
    for u in pool:
        if u.is_matrix or u.is_fused:
            if run:
                runs.append(run)
            run = []
        else:
            run.append(u)
    if run:
        runs.append(run)
    return [r for r in runs if 2 <= kernel_count(r) <= settings.FUSION_MAX_KERNELS]


def _contiguous_segments(members: list[Unit], in_pool: set[str]) -> list[list[Unit]]:
    """The runs of a module's units (in launch order) that are in its pool, split where a unit
    outside the pool falls between them."""
    segments: list[list[Unit]] = []
    previous_in_pool = False
    for u in sorted(members, key=lambda x: (x.ts, x.key)):
        if u.key in in_pool:
            if not previous_in_pool:
                segments.append([])
            segments[-1].append(u)
        previous_in_pool = u.key in in_pool
    return segments


def _module_trees(units: list[Unit], modules: dict[int, dict[str, Any]], covered: set[str]
                  ) -> tuple[dict[int, list[Unit]], dict[int, list[Unit]], dict[int, list[int]]]:
    """(uncovered units directly in each module, every unit under each module, children of each module)."""

    def parent_of(m: int) -> int | None:
        parent = modules.get(m, {}).get("parent_module_id")
        return parent if parent in modules else None

    direct: dict[int, list[Unit]] = defaultdict(list)
    subtree: dict[int, list[Unit]] = defaultdict(list)  # every unit under the module, covered or not
    for u in units:
        if u.module_id is None or u.module_id not in modules:
            continue
        if u.key not in covered:
            direct[u.module_id].append(u)
        m: int | None = u.module_id
        seen: set[int] = set()
        while m is not None and m not in seen:
            seen.add(m)
            subtree[m].append(u)
            m = parent_of(m)
    children: dict[int, list[int]] = defaultdict(list)
    for module in subtree:
        parent = parent_of(module)
        if parent is not None:
            children[parent].append(module)
    return direct, subtree, children


def module_instances(units: list[Unit], modules: dict[int, dict[str, Any]], covered: set[str]) -> list[Instance]:
    """Innermost module call whose uncovered kernels form one contiguous run of 2..FUSION_MAX_KERNELS;
    a module with a longer run contributes that run's chains of non-GEMM ops instead. Kernels of a
    module that stay alone move up to the parent module, where they may join a run."""
    direct, subtree, children = _module_trees(units, modules, covered)
    leftover: dict[int, list[Unit]] = {}
    found: list[Instance] = []
    for m in sorted(subtree, key=lambda x: (-modules[x]["depth"], x)):
        pool = list(direct.get(m, []))
        for child in children.get(m, []):
            pool.extend(leftover.pop(child, []))
        segments = _contiguous_segments(subtree[m], {u.key for u in pool})
        module_class, chain = modules[m]["module_class"], list(modules[m]["module_chain"])
        kept: list[Unit] = []
        for segment in segments:
            kernels = kernel_count(segment)
            if kernels < 2:
                kept.extend(segment)
            elif kernels <= settings.FUSION_MAX_KERNELS:
                found.append(Instance("module", module_class, segment, chain))
                covered.update(u.key for u in segment)
            else:
                for run in chains(segment):
                    found.append(Instance("module_chain", module_class, run, chain))
                    covered.update(u.key for u in run)
        leftover[m] = kept
    return found


def op_subtree_instances(db: duckdb.DuckDBPyConnection, trace_id: str, units: list[Unit], ops: OpTable,
                         covered: set[str]) -> list[Instance]:
    """Outermost cpu op whose subtree (over the remaining kernels) has 2..FUSION_MAX_KERNELS kernels."""
    remaining = [(u, u.op_id) for u in units if u.key not in covered and u.op_id is not None]
    ancestry = load_ancestry(db, trace_id, sorted({op_id for _, op_id in remaining}))
    counts: dict[int, int] = defaultdict(int)
    for u, op_id in remaining:
        for a in ancestry.get(op_id) or [op_id]:
            counts[a] += len(u.kernels)
    groups: dict[int, list[Unit]] = defaultdict(list)
    for u, op_id in remaining:
        fitting = [a for a in ancestry.get(op_id) or [op_id] if 2 <= counts[a] <= settings.FUSION_MAX_KERNELS]
        if fitting:
            groups[fitting[-1]].append(u)
    found = []
    for root, members in groups.items():
        op = ops.get(root) or {}
        found.append(Instance("op_subtree", op["name"], sorted(members, key=lambda u: (u.ts, u.key)), module_chain(op)))
        covered.update(u.key for u in members)
    return found
