"""analyzers/regression.py: the noise estimate and the per-metric rules (no warehouse needed)."""

from __future__ import annotations

import math

import pytest

from tracelake.analyzers.regression import CompareSettings, NoiseEstimate, SideSamples, estimate_noise, metric_change


def side(values: list[float], source: str = "profiler_steps") -> SideSamples:
    mean = sum(values) / len(values)
    std = None if len(values) < 2 else math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return SideSamples(
        trace_ids=["t"], file_names=["t.json"], sample_source=source, sample_count=len(values),
        kernel_time_samples_ms=values, kernel_time_mean_ms=mean, kernel_time_std_ms=std,
    )


def band(percent: float | None) -> NoiseEstimate:
    return NoiseEstimate(
        estimated=percent is not None, method="test", baseline_cv_percent=None, candidate_cv_percent=None,
        borrowed_spread=False, standard_error_percent=None, band_percent=percent, welch_df=None, note="",
    )


def test_noise_band_is_k_standard_errors_of_the_relative_difference() -> None:
    baseline, candidate = side([9.0, 10.0, 11.0]), side([18.0, 20.0, 22.0])  # both cv = 10 %
    noise = estimate_noise(baseline, candidate, CompareSettings(noise_standard_errors=3))
    expected_se = math.sqrt(0.1**2 / 3 + 0.1**2 / 3) * 100
    assert noise.estimated and not noise.borrowed_spread
    assert noise.standard_error_percent == pytest.approx(expected_se)
    assert noise.band_percent == pytest.approx(3 * expected_se)
    assert noise.welch_df == pytest.approx(4.0)


def test_a_single_sample_borrows_the_other_sides_spread() -> None:
    noise = estimate_noise(side([9.0, 10.0, 11.0]), side([10.0]), CompareSettings())
    assert noise.estimated and noise.borrowed_spread and noise.welch_df is None
    assert noise.candidate_cv_percent is None
    assert noise.standard_error_percent == pytest.approx(math.sqrt(0.01 / 3 + 0.01 / 1) * 100)
    assert "assumed to vary like the other side" in noise.note


def test_no_noise_with_one_sample_per_side() -> None:
    noise = estimate_noise(side([10.0], "traces"), side([12.0], "traces"), CompareSettings())
    assert not noise.estimated and noise.band_percent is None
    assert "threshold alone" in noise.note


@pytest.mark.parametrize(
    ("baseline", "candidate", "noise_band", "status", "fails"),
    [
        (10.0, 10.4, None, "unchanged", False),  # +4 % under a 5 % threshold
        (10.0, 10.6, None, "slower", True),  # +6 %, noise unknown: the threshold decides
        (10.0, 10.6, 8.0, "within_noise", False),  # +6 % inside a ±8 % band
        (10.0, 9.0, None, "faster", False),
        (None, 3.0, None, "new", False),  # new and gone items never fail the run by themselves
        (3.0, None, None, "gone", False),
        (0.0, 0.0, None, "unchanged", False),
    ],
)
def test_metric_status(baseline, candidate, noise_band, status, fails) -> None:
    change = metric_change("category", "GEMM", "GEMM", baseline, candidate, busy_ms=20.0, gate=True,
                           noise=band(noise_band), config=CompareSettings(threshold_percent=5.0))
    assert (change.status, change.fails) == (status, fails)


def test_tiny_items_are_listed_but_do_not_gate() -> None:
    config = CompareSettings(threshold_percent=5.0, min_item_share_percent=1.0)
    tiny = metric_change("op", "aten::add", "aten::add", 0.1, 0.15, busy_ms=100.0, gate=True, noise=band(None), config=config)
    assert tiny.status == "slower" and not tiny.gating and not tiny.fails
    grown = metric_change("op", "aten::add", "aten::add", 0.5, 2.0, busy_ms=100.0, gate=True, noise=band(None), config=config)
    assert grown.gating and grown.fails  # under the floor in the baseline, above it in the candidate
    headline = metric_change("headline", "total_time_ms", "total GPU time", 0.1, 0.15, busy_ms=100.0, gate=True,
                             noise=band(None), config=config)
    assert headline.fails  # headline gates have no floor
