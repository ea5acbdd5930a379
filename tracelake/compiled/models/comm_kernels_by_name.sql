

with kernels as (
    select * from "warehouse"."main"."kernels"
    where is_comm
),

final as (
    select
        trace_id,
        name,
        is_linked,
        any_value(library) as library,
        count(*) as kernel_count,
        sum(dur_us) / 1000 as total_time_ms,
        avg(dur_us) as avg_time_us
    from kernels
    group by trace_id, name, is_linked
)

select * from final
