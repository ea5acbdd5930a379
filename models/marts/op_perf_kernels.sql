{#- Each op_perf signature (on every platform, as op_perf lists them) paired with the GPU events
    its instances own: the kernels behind a signature's kernel time, for the compute agents'
    kernel mix and for the findings' claims. -#}
{{ config(materialized='view') }}
{%- set instance_signature = [] %}
{%- for column in op_signature_columns() %}{% do instance_signature.append('instances.' ~ column) %}{% endfor %}

with instances as (
    select
        trace_id,
        unified_op_key,
        {%- for column in op_signature_columns() %}
        coalesce({{ column }}, '') as {{ column }}{{ ',' if not loop.last }}
        {%- endfor %}
    from {{ ref('op_perf_instances') }}
),

instance_kernels as (
    select * from {{ ref('int_op_instance_kernels') }}
),

kernels as (
    select * from {{ ref('kernels') }}
),

platforms as (
    select platform from {{ ref('platforms') }}
),

final as (
    select
        {{ op_signature_key('instances.trace_id', 'platforms.platform', instance_signature) }} as signature_key,
        instances.trace_id,
        platforms.platform,
        instances.unified_op_key,
        kernels.event_idx,
        kernels.name as kernel_name,
        kernels.dur_us,
        kernels.kernel_category,
        kernels.kernel_type,
        kernels.library,
        kernels.kernel_precision
    from instances
    inner join instance_kernels
        on instances.trace_id = instance_kernels.trace_id
        and instances.unified_op_key = instance_kernels.unified_op_key
    inner join kernels
        on instance_kernels.trace_id = kernels.trace_id
        and instance_kernels.event_idx = kernels.event_idx
    cross join platforms
)

select * from final
