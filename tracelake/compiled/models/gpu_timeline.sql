

with breakdown as (
    select * from "warehouse"."intermediate"."int_gpu_time_breakdown"
    where event_scope = 'linked' and trace_id in ('@@NEW_TRACE_IDS@@')
),

final as (
    select
        breakdown.trace_id,
        
        breakdown.computation_us / 1000.0 as computation_time_ms,
        breakdown.exposed_comm_us / 1000.0 as exposed_comm_time_ms,
        breakdown.exposed_memcpy_us / 1000.0 as exposed_memcpy_time_ms,
        breakdown.busy_us / 1000.0 as busy_time_ms,
        breakdown.idle_us / 1000.0 as idle_time_ms,
        breakdown.total_us / 1000.0 as total_time_ms,
        breakdown.total_comm_us / 1000.0 as total_comm_time_ms,
        breakdown.total_memcpy_us / 1000.0 as total_memcpy_time_ms,
        case
            when breakdown.total_us > 0 then 100.0 * breakdown.computation_us / breakdown.total_us
        end as computation_time_percent,
        case
            when breakdown.total_us > 0 then 100.0 * breakdown.exposed_comm_us / breakdown.total_us
        end as exposed_comm_time_percent,
        case
            when breakdown.total_us > 0 then 100.0 * breakdown.exposed_memcpy_us / breakdown.total_us
        end as exposed_memcpy_time_percent,
        case
            when breakdown.total_us > 0 then 100.0 * breakdown.busy_us / breakdown.total_us
        end as busy_time_percent,
        case
            when breakdown.total_us > 0 then 100.0 * breakdown.idle_us / breakdown.total_us
        end as idle_time_percent,
        case
            when breakdown.total_us > 0 then 100.0 * breakdown.total_us / breakdown.total_us
        end as total_time_percent,
        case
            when breakdown.total_us > 0 then 100.0 * breakdown.total_comm_us / breakdown.total_us
        end as total_comm_time_percent,
        case
            when breakdown.total_us > 0 then 100.0 * breakdown.total_memcpy_us / breakdown.total_us
        end as total_memcpy_time_percent
    from breakdown
)

select * from final
