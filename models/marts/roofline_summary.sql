{#- TraceLens' per-category roofline sheets, summarized: roofline_ops grouped by sheet, op
    name, model parameters and argument signature, for every platform. A view. -#}
{{ config(materialized='view') }}

with instances as (
    select *, roofline_op_key as instance_key from {{ ref('roofline_ops') }}
),

final as (
    {{ roofline_by_signature('instances', [
        'sheet', 'name', 'perf_params', 'num_kernels', 'process_name', 'process_label', 'thread_name',
        'input_dims', 'input_type', 'input_strides', 'concrete_inputs'
    ]) }}
)

select * from final
