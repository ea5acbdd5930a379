{#- op_perf_instances: every op instance other than a synthetic op has kernel time, so
    kernel_time_us > 0 (every unified op is chosen for its GPU work). A synthetic op carries the
    raw duration of its one kernel, which a zero-length GPU event would make 0, so it is only
    held to kernel_time_us >= 0. Returns the violating instances. -#}
select
    unified_op_key,
    trace_id,
    op_id,
    name,
    is_synthetic,
    kernel_time_us,
    kernel_count
from {{ ref('op_perf_instances') }}
where kernel_time_us is null
    or (not is_synthetic and kernel_time_us <= 0)
    or (is_synthetic and kernel_time_us < 0)
