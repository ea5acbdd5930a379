{#- The op category each launched, non-collective kernel counts under: its launcher's
    (int_kernel_launchers), except under a compiled region that launches kernels itself (no op
    between, as in compiled diffusion transformers), where each kernel takes the op category of
    its own kernel category (agent_categories' compiled_op_category), as the unified table's
    synthetic ops do: a compiled region holding GEMMs, Triton kernels and attention is not all
    GEMM time. A view. -#}
{{ config(materialized='view') }}

with kernels as (
    select * from {{ ref('kernels') }}
    where is_linked and not is_comm
),

launchers as (
    select * from {{ ref('int_kernel_launchers') }}
),

op_categories as (
    select * from {{ ref('op_categories') }}
),

compiled_categories as (
    select category as kernel_category, compiled_op_category from {{ ref('agent_categories') }}
    where category_kind = 'kernel' and coalesce(compiled_op_category, '') <> ''
),

compiled_region_launchers as (
    select launchers.trace_id, launchers.launcher_event_idx, launchers.name, launchers.is_backward
    from launchers
    left join op_categories on launchers.name = op_categories.op_name
    where op_categories.category is null
        and regexp_matches(launchers.name, '{{ var("compiled_region_pattern") }}')
),

final as (
    select
        kernels.trace_id,
        kernels.event_idx as kernel_event_idx,
        kernels.launcher_event_idx,
        kernels.ts_us,
        kernels.end_us,
        kernels.dur_us,
        case
            when compiled_region_launchers.launcher_event_idx is null then launchers.op_category
            else coalesce(
                {{ compiled_region_category('compiled_region_launchers.name', 'compiled_region_launchers.is_backward', 'compiled_categories.compiled_op_category') }},
                {{ op_category('null', 'compiled_region_launchers.name', 'kernels.name') }}
            )
        end as op_category,
        compiled_region_launchers.launcher_event_idx is not null as is_compiled_region_kernel
    from kernels
    inner join launchers
        on kernels.trace_id = launchers.trace_id
        and kernels.launcher_event_idx = launchers.launcher_event_idx
    left join compiled_region_launchers
        on kernels.trace_id = compiled_region_launchers.trace_id
        and kernels.launcher_event_idx = compiled_region_launchers.launcher_event_idx
    left join compiled_categories on kernels.kernel_category = compiled_categories.kernel_category
)

select * from final
