

with annotations as (
    select * from "warehouse"."staging"."stg_trace__events"
    where trace_id in ('@@NEW_TRACE_IDS@@')
        and category = 'user_annotation'
        and dur_us is not null
        and regexp_matches(name, '^(execute_|step\[|prefill\[|decode\[)')
),

vllm_detailed as (
    select
        trace_id, event_idx, ts_us, end_us, name,
        'vllm' as framework,
        'vllm_detailed' as annotation_format,
        cast(regexp_extract(name, '^execute_([0-9]+)_context_', 1) as bigint) as batch_size,
        cast(regexp_extract(name, '_context_([0-9]+)\(', 1) as bigint) as context_requests,
        cast(regexp_extract(name, '_generation_([0-9]+)\(', 1) as bigint) as generation_requests,
        cast(regexp_extract(name, '_context_[0-9]+\(sq([0-9]+)sk', 1) as bigint) as c_sq,
        cast(regexp_extract(name, '_context_[0-9]+\(sq[0-9]+sk([0-9]+)sqsq', 1) as bigint) as c_sk,
        cast(regexp_extract(name, '_context_[0-9]+\([^)]*sqsq([0-9]+)sqsk', 1) as bigint) as c_sqsq,
        cast(regexp_extract(name, '_context_[0-9]+\([^)]*sqsk([0-9]+)\)', 1) as bigint) as c_sqsk,
        cast(regexp_extract(name, '_generation_[0-9]+\(sq([0-9]+)sk', 1) as bigint) as g_sq,
        cast(regexp_extract(name, '_generation_[0-9]+\(sq[0-9]+sk([0-9]+)sqsq', 1) as bigint) as g_sk,
        cast(regexp_extract(name, '_generation_[0-9]+\([^)]*sqsq([0-9]+)sqsk', 1) as bigint) as g_sqsq,
        cast(regexp_extract(name, '_generation_[0-9]+\([^)]*sqsk([0-9]+)\)', 1) as bigint) as g_sqsk
    from annotations
    where regexp_matches(name, '^execute_[0-9]+_context_[0-9]+\(sq[0-9]+sk[0-9]+sqsq[0-9]+sqsk[0-9]+\)_generation_[0-9]+\(sq[0-9]+sk[0-9]+sqsq[0-9]+sqsk[0-9]+\)$')
),

vllm_native_counts as (
    select
        trace_id, event_idx, ts_us, end_us, name,
        cast(regexp_extract(name, '^execute_context_([0-9]+)\(', 1) as bigint) as context_requests,
        cast(regexp_extract(name, '_generation_([0-9]+)\(', 1) as bigint) as generation_requests,
        cast(regexp_extract(name, '^execute_context_[0-9]+\(([0-9]+)_', 1) as bigint) as context_tokens,
        cast(regexp_extract(name, '^execute_context_[0-9]+\([0-9]+_([0-9]+)\)', 1) as bigint) as context_tokens_squared,
        cast(regexp_extract(name, '_generation_[0-9]+\(([0-9]+)\)$', 1) as bigint) as generation_kv_tokens
    from annotations
    where regexp_matches(name, '^execute_context_[0-9]+\([0-9]+_[0-9]+\)_generation_[0-9]+\([0-9]+\)$')
),

vllm_native as (
    select
        trace_id, event_idx, ts_us, end_us, name,
        'vllm' as framework,
        'vllm_native' as annotation_format,
        context_requests + generation_requests as batch_size,
        context_requests,
        generation_requests,
        context_tokens as c_sq,
        case when context_requests = 0 then 0 end as c_sk,
        context_tokens_squared as c_sqsq,
        case when context_requests = 0 then 0 end as c_sqsk,
        generation_requests as g_sq,
        generation_kv_tokens as g_sk,
        generation_requests as g_sqsq,
        generation_kv_tokens as g_sqsk
    from vllm_native_counts
),

sglang_fields as (
    select
        trace_id, event_idx, ts_us, end_us, name,
        regexp_extract(name, '^step\[([A-Z]+)', 1) as forward_mode,
        cast(nullif(regexp_extract(name, '[ \[]bs=([0-9]+)', 1), '') as bigint) as batch_size,
        cast(nullif(regexp_extract(name, '[ \[]c_sq=([0-9]+)', 1), '') as bigint) as c_sq,
        cast(nullif(regexp_extract(name, '[ \[]c_sk=([0-9]+)', 1), '') as bigint) as c_sk,
        cast(nullif(regexp_extract(name, '[ \[]c_sqsq=([0-9]+)', 1), '') as bigint) as c_sqsq,
        cast(nullif(regexp_extract(name, '[ \[]c_sqsk=([0-9]+)', 1), '') as bigint) as c_sqsk,
        cast(nullif(regexp_extract(name, '[ \[]g_sq=([0-9]+)', 1), '') as bigint) as g_sq,
        cast(nullif(regexp_extract(name, '[ \[]g_sk=([0-9]+)', 1), '') as bigint) as g_sk,
        cast(nullif(regexp_extract(name, '[ \[]g_sqsq=([0-9]+)', 1), '') as bigint) as g_sqsq,
        cast(nullif(regexp_extract(name, '[ \[]g_sqsk=([0-9]+)', 1), '') as bigint) as g_sqsk
    from annotations
    where regexp_matches(name, '^step\[[A-Z]+( [a-z_]+=[0-9]+)*\]$')
),

sglang as (
    select
        trace_id, event_idx, ts_us, end_us, name,
        'sglang' as framework,
        'sglang' as annotation_format,
        batch_size,
        case forward_mode when 'EXTEND' then batch_size when 'DECODE' then 0 when 'IDLE' then 0 end as context_requests,
        case forward_mode when 'DECODE' then batch_size when 'EXTEND' then 0 when 'IDLE' then 0 end as generation_requests,
        c_sq, c_sk, c_sqsq, c_sqsk, g_sq, g_sk, g_sqsq, g_sqsk
    from sglang_fields
),

atom_fields as (
    select
        trace_id, event_idx, ts_us, end_us, name,
        regexp_extract(name, '^(prefill|decode)\[', 1) as atom_phase,
        cast(nullif(regexp_extract(name, '[ \[]bs=([0-9]+)', 1), '') as bigint) as batch_size,
        cast(nullif(regexp_extract(name, '[ \[]sq=([0-9]+)', 1), '') as bigint) as sq,
        cast(nullif(regexp_extract(name, '[ \[]sk=([0-9]+)', 1), '') as bigint) as sk,
        cast(nullif(regexp_extract(name, '[ \[]sqsq=([0-9]+)', 1), '') as bigint) as sqsq,
        cast(nullif(regexp_extract(name, '[ \[]sqsk=([0-9]+)', 1), '') as bigint) as sqsk
    from annotations
    where regexp_matches(name, '^(prefill|decode)\[[^]]*\]$')
),

atom as (
    select
        trace_id, event_idx, ts_us, end_us, name,
        'atom' as framework,
        'atom' as annotation_format,
        batch_size,
        case atom_phase when 'prefill' then batch_size else 0 end as context_requests,
        case atom_phase when 'decode' then batch_size else 0 end as generation_requests,
        case atom_phase when 'prefill' then sq else 0 end as c_sq,
        case atom_phase when 'prefill' then sk else 0 end as c_sk,
        case atom_phase when 'prefill' then sqsq else 0 end as c_sqsq,
        case atom_phase when 'prefill' then sqsk else 0 end as c_sqsk,
        case atom_phase when 'decode' then sq else 0 end as g_sq,
        case atom_phase when 'decode' then sk else 0 end as g_sk,
        case atom_phase when 'decode' then sqsq else 0 end as g_sqsq,
        case atom_phase when 'decode' then sqsk else 0 end as g_sqsk
    from atom_fields
),

diffusion as (
    select
        trace_id, event_idx, ts_us, end_us, name,
        'diffusion' as framework,
        'diffusion' as annotation_format,
        cast(regexp_extract(name, '^execute_diffusion_([0-9]+)_', 1) as bigint) as batch_size,
        cast(null as bigint) as context_requests,
        cast(null as bigint) as generation_requests,
        cast(null as bigint) as c_sq, cast(null as bigint) as c_sk,
        cast(null as bigint) as c_sqsq, cast(null as bigint) as c_sqsk,
        cast(null as bigint) as g_sq, cast(null as bigint) as g_sk,
        cast(null as bigint) as g_sqsq, cast(null as bigint) as g_sqsk
    from annotations
    where regexp_matches(name, '^execute_diffusion_[0-9]+_[0-9]+x[0-9]+')
),

parsed_steps as (
    select * from vllm_detailed
    union all select * from vllm_native
    union all select * from sglang
    union all select * from atom
    union all select * from diffusion
),

phased_steps as (
    select
        *,
        case
            when framework = 'diffusion' then 'denoise'
            when regexp_matches(name, '^step\[MIXED') then 'mixed'
            when context_requests > 0 and generation_requests > 0 then 'mixed'
            when context_requests > 0 then 'prefill'
            when generation_requests > 0 then 'decode'
            when regexp_matches(name, '^step\[IDLE') then 'idle'
        end as phase,
        c_sq is not null and c_sk is not null and c_sqsq is not null and c_sqsk is not null
            and g_sq is not null and g_sk is not null and g_sqsq is not null and g_sqsk is not null
            as has_attention_aggregates
    from parsed_steps
),

enclosing_steps as (
    -- the tightest other step annotation of the same trace that contains this one
    select
        inner_step.trace_id,
        inner_step.event_idx,
        max_by(outer_step.event_idx, outer_step.ts_us) as enclosing_event_idx
    from phased_steps as inner_step
    inner join phased_steps as outer_step
        on inner_step.trace_id = outer_step.trace_id
        and inner_step.event_idx <> outer_step.event_idx
        and outer_step.ts_us <= inner_step.ts_us
        and outer_step.end_us >= inner_step.end_us
        and (outer_step.ts_us < inner_step.ts_us or outer_step.end_us > inner_step.end_us
             or outer_step.event_idx < inner_step.event_idx)
    group by all
),

final as (
    select
        phased_steps.trace_id,
        phased_steps.event_idx,
        phased_steps.ts_us,
        phased_steps.end_us,
        phased_steps.name,
        phased_steps.framework,
        phased_steps.annotation_format,
        phased_steps.phase,
        phased_steps.batch_size,
        phased_steps.context_requests,
        phased_steps.generation_requests,
        phased_steps.c_sq,
        phased_steps.c_sk,
        phased_steps.c_sqsq,
        phased_steps.c_sqsk,
        phased_steps.g_sq,
        phased_steps.g_sk,
        phased_steps.g_sqsq,
        phased_steps.g_sqsk,
        phased_steps.has_attention_aggregates,
        enclosing_steps.enclosing_event_idx
    from phased_steps
    left join enclosing_steps
        on phased_steps.trace_id = enclosing_steps.trace_id
        and phased_steps.event_idx = enclosing_steps.event_idx
)

select * from final
