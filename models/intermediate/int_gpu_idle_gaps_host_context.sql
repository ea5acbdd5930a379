{#- One row per GPU idle gap with what the launching host thread showed at its ends: the innermost
    python frame (else cpu op) when the GPU went idle and when it launched again (the data-loading
    frame around it when the host was fetching a batch: what the host was doing, not the copy it ran
    inside it), whether any host
    frame was recorded at all, and when the runtime call in progress at the gap's start returned. -#}
with gaps as (
    select * from {{ ref('gpu_idle_gaps') }}
),

final as (
    select
        trace_id,
        gap_id,
        gap_class,
        gap_class_reason,
        duration_us as gap_us,
        launch_lead_us,
        launch_delay_us,
        coalesce(start_python_function_name, start_cpu_op_name, end_python_function_name, end_cpu_op_name)
            is not null as has_host_evidence,
        start_runtime_name,
        start_runtime_end_us - start_us as runtime_return_after_gap_start_us,
        coalesce(start_data_loading_frame, start_python_function_name, start_cpu_op_name) as start_frame,
        coalesce(end_data_loading_frame, end_python_function_name, end_cpu_op_name) as end_frame,
        start_data_loading_frame is not null as start_is_data_loading,
        end_data_loading_frame is not null as end_is_data_loading
    from gaps
)

select * from final
