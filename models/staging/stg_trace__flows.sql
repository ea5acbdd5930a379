with source as (
    select * from {{ source('trace', 'flows') }}
),

renamed as (
    select
        trace_id,
        event_idx,
        cat as category,
        ph as phase,
        flow_id,
        ts as ts_us,
        pid,
        tid,
        bp as binding_point,
        coalesce(cat in (
            {%- for name in var('launch_flow_categories') %}'{{ name }}'{{ "," if not loop.last }}{% endfor -%}
        ), false) as is_launch_flow
    from source
)

select * from renamed
