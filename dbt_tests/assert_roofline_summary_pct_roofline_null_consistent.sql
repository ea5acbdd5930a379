{#- roofline_summary: pct_roofline_mean is null exactly when roofline_time_us is null, or when
    every instance of the signature has zero kernel time (kernel_time_sum_us = 0: a modelled op
    with no GPU work in its subtree, whose throughput TraceLens also leaves undefined, NaN).
    Returns the violating rows. -#}
select
    signature_key,
    trace_id,
    platform,
    sheet,
    name,
    kernel_time_sum_us,
    roofline_time_us,
    pct_roofline_mean
from {{ ref('roofline_summary') }}
where (pct_roofline_mean is null)
    <> (roofline_time_us is null or kernel_time_sum_us = 0)
