{#- One row per (job, all-to-all instance, sending rank, receiving rank): the bytes the sender's
    `In split size` gives each peer (split j goes to the group's j-th rank). Splits count rows of
    the input's first dimension in c10d; each is scaled by the input's elements per row (its
    elements / the sum of its splits: 1 where the splits already count elements) and the dtype
    bytes. Calls whose splits Kineto truncated (past 30 entries) or left empty give no pairs. A view. -#}
{{ config(materialized='view') }}

with calls as (
    select * from {{ ref('collective_calls') }}
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
