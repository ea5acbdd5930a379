{#- One row per memcpy GPU event (gpu_transfers, transfer_kind memcpy) with its direction in the
    multi_kernel agent's words (D2H, H2D, D2D, other) and the part of it no computation or
    communication kernel hides. A view: read one trace at a time. -#}
{{ config(materialized='view') }}

with transfers as (
    select * from {{ ref('gpu_transfers') }}
    where transfer_kind = 'memcpy'
),

final as (
    select
        trace_id,
        event_idx,
        dur_us,
        exposed_us,
        bytes,
        is_linked,
        host_memory,
        case direction
            when 'DtoH' then 'D2H' when 'HtoD' then 'H2D' when 'DtoD' then 'D2D' else 'other'
        end as direction
    from transfers
)

select * from final
