{#- A job_rank_breakdown-shaped model: idle + computation + non-compute = span (HTA's temporal
    breakdown), exposed communication + overlap = communication, and the overlap never exceeds
    either class (µs, within 1e-6 µs). Returns the ranks that break one. -#}
{% test job_rank_breakdown_adds_up(model) %}

with breakdown as (
    select * from {{ model }}
),

checked as (
    select
        job_id,
        rank,
        idle_us + computation_us + non_compute_us - span_us as span_diff_us,
        exposed_comm_us + comm_comp_overlap_us - communication_us as comm_diff_us,
        comm_comp_overlap_us - least(communication_us, computation_us) as overlap_excess_us
    from breakdown
)

select *
from checked
where abs(span_diff_us) > 1e-6
    or abs(comm_diff_us) > 1e-6
    or overlap_excess_us > 1e-6
    or span_diff_us is null
    or comm_diff_us is null

{% endtest %}
