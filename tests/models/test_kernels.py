"""Kernel -> launch -> cpu op linking, checked on real traces against TraceLens' documented counts."""

from __future__ import annotations

from tests.conftest import trace_id_of

BERT_H100 = "h100/gaunernst_bert-small-uncased__1016001.json.gz"


def test_bert_h100_links_every_gpu_event(db) -> None:
    """TraceLens notes: all 61 GPU events of BERT H100 link (60 kernels + 1 memcpy)."""
    trace_id = trace_id_of(db, BERT_H100)
    counts = db.execute(
        "select count(*), count(*) filter (where is_linked), count(*) filter (where category = 'gpu_memcpy') "
        "from kernels where trace_id = ?",
        [trace_id],
    ).fetchone()
    assert counts == (61, 61, 1)
    launches = dict(
        db.execute(
            "select launch_name, count(*) from kernels where trace_id = ? group by 1", [trace_id]
        ).fetchall()
    )
    assert launches == {"cudaLaunchKernel": 34, "cuLaunchKernel": 22, "cudaLaunchKernelExC": 4, "cudaMemcpyAsync": 1}


def test_addmm_launches_cutlass_gemm_through_the_driver(db) -> None:
    trace_id = trace_id_of(db, BERT_H100)
    rows = db.execute(
        "select distinct cpu_op_name from kernels where trace_id = ? and name like '%cutlass%wmma_tensorop_bf16%'",
        [trace_id],
    ).fetchall()
    assert ("aten::addmm",) in rows


def test_qwen_h100_leaves_pre_window_kernels_unlinked(db) -> None:
    """TraceLens notes: 509 of the 1707 GPU events of Qwen H100 have no runtime parent."""
    trace_id = trace_id_of(db, "h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    total, unlinked = db.execute(
        "select count(*), count(*) filter (where not is_linked) from kernels where trace_id = ?", [trace_id]
    ).fetchone()
    assert (total, unlinked) == (1707, 509)


def test_graph_launch_takes_every_kernel_sharing_its_correlation(db) -> None:
    trace_id = trace_id_of(db, "inference/vllm_decode_full/graph_execution.json.gz")
    rows = db.execute(
        "select launch_name, count(*) from kernels where trace_id = ? and is_graph_launch group by 1", [trace_id]
    ).fetchall()
    assert len(rows) == 1 and rows[0][0] == "hipGraphLaunch"
    assert rows[0][1] > 400  # one hipGraphLaunch replays >400 kernels in this decode step
    assert db.execute(
        "select count(*) from kernels where trace_id = ? and is_graph_launch and cpu_op_id is not null", [trace_id]
    ).fetchone() == (0,)


def test_gpu_only_trace_links_through_runtime_without_cpu_ops(db) -> None:
    trace_id = trace_id_of(db, "mi210/gpu_only_trace/gpu_only_trace.json.gz")
    linked, with_op = db.execute(
        "select count(*) filter (where is_linked), count(cpu_op_id) from kernels where trace_id = ?", [trace_id]
    ).fetchone()
    assert linked == 562 and with_op == 0
    assert db.execute("select count(*) from cpu_ops where trace_id = ?", [trace_id]).fetchone() == (0,)


def test_communication_kernels_are_bucketed_by_name(db) -> None:
    rows = db.execute(
        "select distinct name from kernels where gpu_bucket = 'communication'"
    ).fetchall()
    assert rows, "the resnet MI300X trace has RCCL kernels"
    assert all(any(s in name.lower() for s in ("nccl", "rccl", "cross_device_reduce")) for (name,) in rows)
