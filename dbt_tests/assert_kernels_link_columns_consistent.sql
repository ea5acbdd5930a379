{#- kernels: a linked GPU op has its launch (is_linked implies launch_event_idx), it is linked
    exactly when its link_method is not `none`, and a known launching cpu op has a name (cpu_op_id
    implies cpu_op_name). Returns the violating GPU ops. -#}
select
    kernel_key,
    trace_id,
    event_idx,
    is_linked,
    link_method,
    launch_event_idx,
    cpu_op_id,
    cpu_op_name
from {{ ref('kernels') }}
where (is_linked and launch_event_idx is null)
    or (is_linked <> (link_method <> 'none'))
    or (cpu_op_id is not null and cpu_op_name is null)
