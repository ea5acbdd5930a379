{#- One row per serving-engine step annotation (a `user_annotation` host event that a vLLM, SGLang,
    ATOM or diffusion patch records around one execution step), parsed into its phase, request
    counts and the per-step attention aggregates (TraceLens TraceUtils/annotation_utils.py formats,
    ../shared/reference/tracelens_core.md §13.2):
    - vLLM detailed `execute_<tokens>_context_<Rc>(sq..sk..sqsq..sqsk..)_generation_<Rg>(sq..sk..sqsq..sqsk..)`;
    - vLLM native `execute_context_<Rc>(<c_sq>[_..])_generation_<Rg>(<g_sq>[_..])`;
    - SGLang `step[EXTEND|DECODE|MIXED bs=.. [toks=..] [c=.. g=..] [c_sq=.. c_sk=.. c_sqsq=.. c_sqsk=..] [g_sq=.. ...]]`;
    - ATOM `prefill[bs=.. tok=.. [sqsq=.. sqsk=.. sk=..]]` / `decode[bs=..[/pad] tok=.. ...]`;
    - diffusion `execute_diffusion_<bs>_<H>x<W>` (one denoising step).
    `c_*` are the context (prefill) aggregates and `g_*` the generation (decode) ones: sq = ΣN_Q,
    sk = ΣN_KV, sqsq = ΣN_Q², sqsk = ΣN_Q·N_KV; null where the format does not carry them. A
    decode request without sq counts one query token (SGLang native DECODE, TraceLens' reading).
    Graph-capture annotations (`capture_<bs>_<mode>`) mark captures, not steps, and are left out. -#}

with annotations as (
    select trace_id, event_idx, ts_us, end_us, name
    from {{ ref('stg_trace__events') }}
    where category = 'user_annotation' and dur_us is not null
        and {{ regex_search('name', "'^(execute_|step\\[(EXTEND|DECODE|MIXED)\\b|prefill\\[|decode\\[)'") }}
),

{%- set vllm_detailed = "'^execute_([0-9]+)_context_([0-9]+)\\(sq([0-9]+)sk([0-9]+)sqsq([0-9]+)sqsk([0-9]+)\\)_generation_([0-9]+)\\(sq([0-9]+)sk([0-9]+)sqsq([0-9]+)sqsk([0-9]+)\\)'" %}
{#- the two halves of the detailed format (regexp_extract takes at most 9 groups) -#}
{%- set vllm_context = "'_context_([0-9]+)\\(sq([0-9]+)sk([0-9]+)sqsq([0-9]+)sqsk([0-9]+)\\)'" %}
{%- set vllm_generation = "'_generation_([0-9]+)\\(sq([0-9]+)sk([0-9]+)sqsq([0-9]+)sqsk([0-9]+)\\)'" %}
{%- set vllm_native = "'^execute_context_([0-9]+)\\(([0-9]+)[^)]*\\)_generation_([0-9]+)\\(([0-9]+)[^)]*\\)'" %}
{%- set diffusion = "'^execute_diffusion_([0-9]+)_([0-9]+x[0-9]+)'" %}
{%- set sglang = "'^step\\[(EXTEND|DECODE|MIXED)\\b'" %}
{%- set atom = "'^(prefill|decode)\\['" %}

recognized as (
    select
        *,
        case
            when {{ regex_search('name', vllm_detailed) }} then 'vllm_detailed'
            when {{ regex_search('name', vllm_native) }} then 'vllm_native'
            when {{ regex_search('name', diffusion) }} then 'diffusion'
            when {{ regex_search('name', sglang) }} then 'sglang'
            when {{ regex_search('name', atom) }} then 'atom'
        end as annotation_format
    from annotations
),

vllm_detailed_steps as (
    select
        trace_id, event_idx, ts_us, end_us, name, 'vllm' as framework,
        {{ regex_int('name', vllm_context, 1) }} as context_requests,
        {{ regex_int('name', vllm_generation, 1) }} as generation_requests,
        {{ regex_int('name', vllm_context, 2) }} as c_sq,
        {{ regex_int('name', vllm_context, 3) }} as c_sk,
        {{ regex_int('name', vllm_context, 4) }} as c_sqsq,
        {{ regex_int('name', vllm_context, 5) }} as c_sqsk,
        {{ regex_int('name', vllm_generation, 2) }} as g_sq,
        {{ regex_int('name', vllm_generation, 3) }} as g_sk,
        {{ regex_int('name', vllm_generation, 4) }} as g_sqsq,
        {{ regex_int('name', vllm_generation, 5) }} as g_sqsk,
        cast(null as varchar) as mode_word
    from recognized where annotation_format = 'vllm_detailed'
),

vllm_native_steps as (
    select
        trace_id, event_idx, ts_us, end_us, name, 'vllm' as framework,
        {{ regex_int('name', vllm_native, 1) }} as context_requests,
        {{ regex_int('name', vllm_native, 3) }} as generation_requests,
        {{ regex_int('name', vllm_native, 2) }} as c_sq,
        cast(null as bigint) as c_sk, cast(null as bigint) as c_sqsq, cast(null as bigint) as c_sqsk,
        {{ regex_int('name', vllm_native, 4) }} as g_sq,
        cast(null as bigint) as g_sk, cast(null as bigint) as g_sqsq, cast(null as bigint) as g_sqsk,
        cast(null as varchar) as mode_word
    from recognized where annotation_format = 'vllm_native'
),

sglang_fields as (
    select
        *,
        {{ regex_extract('name', sglang, 1) }} as mode_word,
        {{ annotation_field('name', 'bs') }} as bs,
        {{ annotation_field('name', 'toks') }} as toks,
        {{ annotation_field('name', 'c') }} as c_requests,
        {{ annotation_field('name', 'g') }} as g_requests,
        {%- for side in ['c', 'g'] %}
        {%- for agg in ['sq', 'sk', 'sqsq', 'sqsk'] %}
        {{ annotation_field('name', side ~ '_' ~ agg) }} as {{ side }}_{{ agg }}{{ ',' if not loop.last or side == 'c' }}
        {%- endfor %}
        {%- endfor %}
    from recognized where annotation_format = 'sglang'
),

sglang_steps as (
    select
        trace_id, event_idx, ts_us, end_us, name, 'sglang' as framework,
        case mode_word when 'EXTEND' then bs when 'MIXED' then c_requests else 0 end as context_requests,
        case mode_word when 'DECODE' then bs when 'MIXED' then g_requests else 0 end as generation_requests,
        case when mode_word = 'DECODE' then coalesce(c_sq, 0) else coalesce(c_sq, toks) end as c_sq,
        c_sk, c_sqsq, c_sqsk,
        case when mode_word = 'DECODE' then coalesce(g_sq, bs) else g_sq end as g_sq,
        g_sk, g_sqsq, g_sqsk,
        mode_word
    from sglang_fields
),

atom_fields as (
    select
        *,
        {{ regex_extract('name', atom, 1) }} as atom_phase,
        {{ annotation_field('name', 'bs') }} as bs,
        {{ annotation_field('name', 'tok') }} as tok,
        {{ annotation_field('name', 'sk') }} as sk,
        {{ annotation_field('name', 'sqsq') }} as sqsq,
        {{ annotation_field('name', 'sqsk') }} as sqsk
    from recognized where annotation_format = 'atom'
),

atom_steps as (
    select
        trace_id, event_idx, ts_us, end_us, name, 'atom' as framework,
        case when atom_phase = 'prefill' then bs else 0 end as context_requests,
        case when atom_phase = 'decode' then bs else 0 end as generation_requests,
        case when atom_phase = 'prefill' then tok else 0 end as c_sq,
        case when atom_phase = 'prefill' then sk end as c_sk,
        case when atom_phase = 'prefill' then sqsq end as c_sqsq,
        case when atom_phase = 'prefill' then sqsk end as c_sqsk,
        case when atom_phase = 'decode' then tok else 0 end as g_sq,
        case when atom_phase = 'decode' then sk end as g_sk,
        case when atom_phase = 'decode' then sqsq end as g_sqsq,
        case when atom_phase = 'decode' then sqsk end as g_sqsk,
        upper(atom_phase) as mode_word
    from atom_fields
),

diffusion_steps as (
    select
        trace_id, event_idx, ts_us, end_us, name, 'diffusion' as framework,
        cast(null as bigint) as context_requests,
        {{ regex_int('name', diffusion, 1) }} as generation_requests,
        {%- for side in ['c', 'g'] %}
        {%- for agg in ['sq', 'sk', 'sqsq', 'sqsk'] %}
        cast(null as bigint) as {{ side }}_{{ agg }},
        {%- endfor %}
        {%- endfor %}
        'DENOISE' as mode_word
    from recognized where annotation_format = 'diffusion'
),

parsed_steps as (
    select * from vllm_detailed_steps
    union all select * from vllm_native_steps
    union all select * from sglang_steps
    union all select * from atom_steps
    union all select * from diffusion_steps
),

final as (
    select
        trace_id,
        event_idx,
        ts_us,
        end_us,
        name,
        framework,
        case
            when mode_word = 'DENOISE' then 'denoise'
            when mode_word = 'MIXED' then 'mixed'
            when coalesce(context_requests, 0) > 0 and coalesce(generation_requests, 0) > 0 then 'mixed'
            when coalesce(context_requests, 0) > 0 or mode_word = 'EXTEND' then 'prefill'
            when coalesce(generation_requests, 0) > 0 or mode_word = 'DECODE' then 'decode'
        end as phase,
        case
            when framework = 'diffusion' then generation_requests
            else coalesce(context_requests, 0) + coalesce(generation_requests, 0)
        end as batch_size,
        context_requests,
        generation_requests,
        c_sq,
        c_sk,
        c_sqsq,
        c_sqsk,
        g_sq,
        g_sk,
        g_sqsq,
        g_sqsk
    from parsed_steps
)

select * from final
