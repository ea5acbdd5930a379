{#- One row per memcpy / memset GPU event (copy kernels of the memcpy bucket included): direction,
    host memory kind, bytes, achieved bandwidth, and the part of the copy no computation or
    communication kernel hides (overlap against their merged linked intervals). -#}
{{ config(materialized='incremental') }}

with kernels as (
    select * from {{ ref('kernels') }}
    where (category in ('gpu_memcpy', 'gpu_memset') or gpu_bucket = 'memcpy') and {{ is_new_trace() }}
),

gpu_ops as (
    select trace_id, event_idx, kind from {{ ref('stg_trace__gpu_ops') }}
    where {{ is_new_trace() }}
),

accumulated_intervals as (
    select * from {{ ref('int_gpu_intervals_accumulated') }}
    where event_scope = 'linked' and interval_set = 'compute_or_comm' and {{ is_new_trace() }}
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

described_transfers as (
    {#- CUPTI names say `Memcpy HtoD (Pinned -> Device)`; ROCm names often say only `Memcpy` and
        carry args.kind; ROCm copy kernels say MEMORY_COPY_HOST_TO_DEVICE. The short code wins. -#}
    select
        *,
        case
            when transfer_kind = 'memset' then 'memset'
            when {{ regex_search('lower_name', "'\\bptop\\b|peer'") }} then 'PtoP'
            when {{ regex_search('lower_name', "'\\bhtod\\b|host_to_device|hosttodevice|(host|pinned|pageable) -> device'") }} then 'HtoD'
            when {{ regex_search('lower_name', "'\\bdtoh\\b|device_to_host|devicetohost|device -> (host|pinned|pageable)'") }} then 'DtoH'
            when {{ regex_search('lower_name', "'\\bdtod\\b|device_to_device|devicetodevice|device -> device'") }} then 'DtoD'
            when {{ regex_search('lower_name', "'\\bhtoh\\b|host_to_host|hosttohost|(host|pinned|pageable) -> (host|pinned|pageable)'") }} then 'HtoH'
            when kind in ('HtoD', 'DtoH', 'DtoD', 'HtoH', 'PtoP') then kind
        end as direction,
        case
            when {{ regex_search('lower_name', "'pageable'") }} then 'pageable'
            when {{ regex_search('lower_name', "'pinned'") }} then 'pinned'
        end as host_memory,
        'compute_or_comm' as interval_set
    from named_transfers
),

hidden_before_start as (
    {{ cover_measure_until('described_transfers', 'ts_us', 'accumulated_intervals', 'hidden_before_start_us') }}
),

hidden_before_end as (
    {{ cover_measure_until('hidden_before_start', 'end_us', 'accumulated_intervals', 'hidden_before_end_us') }}
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
