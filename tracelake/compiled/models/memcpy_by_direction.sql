

with copies as (
    select * from "warehouse"."main"."memcpy_copies"
),

final as (
    select
        trace_id,
        direction,
        count(*) filter (where is_linked) as copy_count,
        coalesce(sum(dur_us) filter (where is_linked), 0) / 1000 as total_time_ms,
        coalesce(sum(exposed_us) filter (where is_linked), 0) / 1000 as exposed_time_ms,
        avg(dur_us) filter (where is_linked) as avg_time_us,
        max(dur_us) filter (where is_linked) as max_time_us,
        sum(bytes) filter (where is_linked) as total_bytes,
        avg(bytes) filter (where is_linked) as avg_bytes,
        sum(bytes) filter (where is_linked)
            / nullif(sum(dur_us) filter (where is_linked and bytes is not null), 0) / 1000 as achieved_gb_per_s,
        count(*) filter (where is_linked and host_memory = 'pageable') as pageable_count,
        coalesce(sum(dur_us) filter (where is_linked and host_memory = 'pageable'), 0) / 1000 as pageable_time_ms,
        sum(bytes) filter (where is_linked and host_memory = 'pageable') as pageable_bytes,
        coalesce(sum(exposed_us) filter (where is_linked and host_memory = 'pageable'), 0) / 1000 as pageable_exposed_ms,
        count(*) filter (where is_linked and host_memory = 'pinned') as pinned_count,
        count(*) filter (where not is_linked) as unlinked_count
    from copies
    group by trace_id, direction
)

select * from final
