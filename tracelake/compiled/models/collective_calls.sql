

with calls as (
    select * from "warehouse"."intermediate"."int_job_collective_calls"
),

clock_offsets as (
    select * from "warehouse"."main"."job_clock_offsets"
),

aligned as (
    select
        calls.*,
        calls.start_raw_us - case when clock_offsets.applied then clock_offsets.offset_us else 0 end as start_us,
        calls.end_raw_us - case when clock_offsets.applied then clock_offsets.offset_us else 0 end as end_us_aligned,
        clock_offsets.offset_us is null as is_node_unaligned
    from calls
    left join clock_offsets
        on calls.job_id = clock_offsets.job_id
        and calls.node_id = clock_offsets.node_id
),

instance_spans as (
    select
        job_id,
        instance_id,
        max(start_us) as latest_start_us,
        count(distinct node_id) > 1 and bool_or(is_node_unaligned) as is_unmeasurable
    from aligned
    group by job_id, instance_id
),

waits as (
    select
        aligned.*,
        case when not instance_spans.is_unmeasurable then instance_spans.latest_start_us - aligned.start_us end
            as wait_us
    from aligned
    inner join instance_spans
        on aligned.job_id = instance_spans.job_id
        and aligned.instance_id = instance_spans.instance_id
),

arrivals as (
    select
        waits.*,
        wait_us is not null and row_number() over (
            partition by job_id, instance_id order by wait_us asc nulls last, rank asc
        ) = 1 as is_last_arrival,
        wait_us is not null and row_number() over (
            partition by job_id, instance_id order by wait_us desc nulls last, rank desc
        ) = 1 as is_first_arrival
    from waits
),

final as (
    select
        job_id,
        trace_id,
        rank,
        node_id,
        event_idx,
        stream,
        kernel_name,
        collective_name,
        collective_name_raw,
        collective_kind,
        is_p2p,
        dtype,
        dtype_bytes,
        in_nelems,
        out_nelems,
        msg_bytes,
        group_size,
        pg_name,
        pg_desc,
        pg_ranks,
        pg_ranks_truncated,
        in_split_sizes,
        out_split_sizes,
        splits_truncated,
        seq,
        comms_id,
        metadata_source,
        start_us,
        end_us_aligned as end_us,
        dur_us,
        match_method,
        instance_id,
        index_in_group,
        wait_us,
        is_last_arrival,
        is_first_arrival,
        bus_factor_slope,
        bus_factor_constant
    from arrivals
)

select * from final
