

with kernels as (
    select * from "warehouse"."main"."kernels"
    where (category in ('gpu_memcpy', 'gpu_memset') or gpu_bucket = 'memcpy') and trace_id in ('@@NEW_TRACE_IDS@@')
),

gpu_ops as (
    select trace_id, event_idx, kind from "warehouse"."staging"."stg_trace__gpu_ops"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

accumulated_intervals as (
    select * from "warehouse"."intermediate"."int_gpu_intervals_accumulated"
    where event_scope = 'linked' and interval_set = 'compute_or_comm' and trace_id in ('@@NEW_TRACE_IDS@@')
),

named_transfers as (
    select
        kernels.*,
        gpu_ops.kind,
        lower(kernels.name) as lower_name,
        case when kernels.category = 'gpu_memset' then 'memset' else 'memcpy' end as transfer_kind
    from kernels
    inner join gpu_ops on kernels.trace_id = gpu_ops.trace_id and kernels.event_idx = gpu_ops.event_idx
),

described_transfers as (select
        *,
        case
            when transfer_kind = 'memset' then 'memset'
            when regexp_matches(lower_name, '\bptop\b|peer') then 'PtoP'
            when regexp_matches(lower_name, '\bhtod\b|host_to_device|hosttodevice|(host|pinned|pageable) -> device') then 'HtoD'
            when regexp_matches(lower_name, '\bdtoh\b|device_to_host|devicetohost|device -> (host|pinned|pageable)') then 'DtoH'
            when regexp_matches(lower_name, '\bdtod\b|device_to_device|devicetodevice|device -> device') then 'DtoD'
            when regexp_matches(lower_name, '\bhtoh\b|host_to_host|hosttohost|(host|pinned|pageable) -> (host|pinned|pageable)') then 'HtoH'
            when kind in ('HtoD', 'DtoH', 'DtoD', 'HtoH', 'PtoP') then kind
        end as direction,
        case
            when regexp_matches(lower_name, 'pageable') then 'pageable'
            when regexp_matches(lower_name, 'pinned') then 'pinned'
        end as host_memory,
        'compute_or_comm' as interval_set
    from named_transfers
),

hidden_before_start as (
    select
        points.*,
        coalesce(
            last_intervals.covered_before_us
                + least(points.ts_us, last_intervals.merged_end_us) - last_intervals.merged_start_us,
            0
        ) as hidden_before_start_us
    from described_transfers as points
    left join (
        select trace_id, point_key, merged_start_us, merged_end_us, covered_before_us
        from (
            select
                trace_id,
                point_key,
                is_point,
                last_value(merged_start_us ignore nulls) over sorted_instants as merged_start_us,
                last_value(merged_end_us ignore nulls) over sorted_instants as merged_end_us,
                last_value(covered_before_us ignore nulls) over sorted_instants as covered_before_us
            from (
                select
                    trace_id, interval_set, merged_start_us as at_us, 0 as is_point,
                    cast(null as bigint) as point_key, merged_start_us, merged_end_us, covered_before_us
                from accumulated_intervals
                union all
                select
                    trace_id, interval_set, ts_us as at_us, 1 as is_point,
                    event_idx as point_key, cast(null as double), cast(null as double), cast(null as double)
                from described_transfers
            ) as instants
            window sorted_instants as (
                partition by trace_id, interval_set
                order by at_us, is_point
                rows between unbounded preceding and current row
            )
        ) as looked_up
        where is_point = 1
    ) as last_intervals
        on points.trace_id = last_intervals.trace_id
        and points.event_idx = last_intervals.point_key
),

hidden_before_end as (
    select
        points.*,
        coalesce(
            last_intervals.covered_before_us
                + least(points.end_us, last_intervals.merged_end_us) - last_intervals.merged_start_us,
            0
        ) as hidden_before_end_us
    from hidden_before_start as points
    left join (
        select trace_id, point_key, merged_start_us, merged_end_us, covered_before_us
        from (
            select
                trace_id,
                point_key,
                is_point,
                last_value(merged_start_us ignore nulls) over sorted_instants as merged_start_us,
                last_value(merged_end_us ignore nulls) over sorted_instants as merged_end_us,
                last_value(covered_before_us ignore nulls) over sorted_instants as covered_before_us
            from (
                select
                    trace_id, interval_set, merged_start_us as at_us, 0 as is_point,
                    cast(null as bigint) as point_key, merged_start_us, merged_end_us, covered_before_us
                from accumulated_intervals
                union all
                select
                    trace_id, interval_set, end_us as at_us, 1 as is_point,
                    event_idx as point_key, cast(null as double), cast(null as double), cast(null as double)
                from hidden_before_start
            ) as instants
            window sorted_instants as (
                partition by trace_id, interval_set
                order by at_us, is_point
                rows between unbounded preceding and current row
            )
        ) as looked_up
        where is_point = 1
    ) as last_intervals
        on points.trace_id = last_intervals.trace_id
        and points.event_idx = last_intervals.point_key
),

final as (
    select
        kernel_key,
        trace_id,
        event_idx,
        category,
        transfer_kind,
        name,
        direction,
        host_memory,
        bytes,
        ts_us,
        dur_us,
        end_us,
        case when dur_us > 0 then bytes / (dur_us * 1e3) end as achieved_gb_per_s,
        case
            when transfer_kind = 'memcpy'
                then greatest(dur_us - (hidden_before_end_us - hidden_before_start_us), 0)
        end as exposed_us,
        device,
        stream,
        is_linked,
        launch_event_idx,
        launch_name
    from hidden_before_end
)

select * from final
