{#- Why an assumed roofline platform is the one it is, as text to append: ' (the default for a CUDA
    trace)', ' (the default for a ROCm trace)', or, with the runtime unknown (int_trace_platforms'
    assumed_for_runtime null), the plain default's reason. -#}
{% macro assumed_platform_reason(runtime_column) -%}
    case {{ runtime_column }}
        when 'cuda' then ' (the default for a CUDA trace)'
        when 'rocm' then ' (the default for a ROCm trace)'
        else ' (the default when the runtime is not known either)'
    end
{%- endmacro %}
