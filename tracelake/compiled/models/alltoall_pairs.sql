

with calls as (
    select * from "warehouse"."main"."collective_calls"
    where collective_name in ('alltoall', 'alltoallv')
        and len(in_split_sizes) > 0
        and not splits_truncated
        and dtype_bytes is not null
),

splits as (
    select
        job_id,
        instance_id,
        rank as src_rank,
        pg_ranks,
        unnest(in_split_sizes) as split_size,
        generate_subscripts(in_split_sizes, 1) as split_index,
        in_nelems::double / nullif(list_sum(in_split_sizes), 0) as elements_per_split_unit,
        dtype_bytes
    from calls
),

final as (
    select
        job_id,
        instance_id,
        src_rank,
        coalesce(pg_ranks[split_index], split_index - 1)::integer as dst_rank,
        split_size * coalesce(elements_per_split_unit, 1) * dtype_bytes as bytes
    from splits
)

select * from final
