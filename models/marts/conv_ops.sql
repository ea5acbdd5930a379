{#- The convolution ops of op_perf, on each trace's own platform. A view for users' SQL. -#}
{{ config(materialized='view') }}

{{ op_perf_for_agent('convolution') }}
