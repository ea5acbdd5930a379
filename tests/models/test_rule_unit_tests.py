"""dbt unit tests (given / expected rows) of the transformation rules with edge cases (issue 23):
interval merging, idle-gap classes, serving-step phases and steady state, kernel categories. The
rows are in the models' .yml files; this runs them and checks each one ran and passed, by name."""

from __future__ import annotations

import shutil
from pathlib import Path

from tracelake.dbt_runner import run_dbt
from tracelake.warehouse import Warehouse

# unit test -> the model it tests
RULE_UNIT_TESTS = {
    "gpu_intervals_merge_overlapping_touching_and_nested_across_streams": "int_gpu_intervals_merged",
    "gpu_intervals_accumulate_the_covered_time_before_each_interval": "int_gpu_intervals_accumulated",
    "gap_classes_one_gap_per_class_and_the_threshold_edges": "gpu_idle_gaps",
    "serving_step_annotations_get_their_phase": "int_serving_step_annotations",
    "steady_state_skips_warm_up_steps_per_phase": "phases",
    "denoising_steps_are_the_busiest_models_calls": "phases",
    "the_first_matching_engine_rule_names_the_engine": "int_trace_engines",
    "kernels_without_a_taxonomy_rule_are_unknown_other": "kernels",
    "replay_gpu_nodes_bind_each_event_to_the_later_of_its_launch_and_its_stream": "replay_gpu_nodes",
    "op_fused_steps_match_op_and_kernel_names": "op_fused_steps",
    "op_best_observed_takes_the_fastest_other_trace_on_the_same_platform": "op_best_observed",
    "trace_workloads_prefer_the_model_tag_then_the_identified_model": "trace_workloads",
    "trace_category_kernel_time_counts_every_kernel": "trace_category_kernel_time",
}


def test_the_rule_unit_tests_run_and_pass(warehouse: Warehouse, tmp_path: Path) -> None:
    copy = tmp_path / "warehouse.duckdb"  # dbt writes into the database it tests on: a copy
    shutil.copyfile(warehouse.db_path, copy)
    models = sorted(set(RULE_UNIT_TESTS.values()))
    # run_dbt raises, with the failing tests' messages, when one fails
    result = run_dbt(copy, tmp_path / "dbt", ["test", "--select", *(f"test_type:unit,{m}" for m in models)])
    statuses = {r.node.name: str(r.status) for r in result.results}
    assert set(RULE_UNIT_TESTS) <= set(statuses), sorted(set(RULE_UNIT_TESTS) - set(statuses))
    assert {name: statuses[name] for name in RULE_UNIT_TESTS} == dict.fromkeys(RULE_UNIT_TESTS, "pass")
