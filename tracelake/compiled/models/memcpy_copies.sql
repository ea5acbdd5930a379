

with transfers as (
    select * from "warehouse"."main"."gpu_transfers"
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
