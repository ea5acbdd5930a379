

with run_category_time as (
    select * from "warehouse"."intermediate"."int_run_category_time"
),

category_ranks as (
    select
        group_key,
        op_category,
        row_number() over (partition by group_key order by sum(kernel_time_ms) desc, op_category) as category_rank
    from run_category_time
    group by group_key, op_category
),

charted as (
    select
        run_category_time.group_key,
        run_category_time.run_index,
        case
            when category_ranks.category_rank <= 8 then run_category_time.op_category
            else 'smaller categories'
        end as op_category,
        min(category_ranks.category_rank) as category_rank,
        sum(run_category_time.kernel_time_ms) as kernel_time_ms
    from run_category_time
    inner join category_ranks
        on category_ranks.group_key = run_category_time.group_key
        and category_ranks.op_category = run_category_time.op_category
    group by all
),

final as (
    select
        group_key,
        run_index,
        op_category,
        category_rank,
        kernel_time_ms,
        100 * kernel_time_ms / nullif(sum(kernel_time_ms) over (partition by group_key, run_index), 0) as percent
    from charted
)

select * from final
