"""volumeStatsAggPeriod (``--volume-stats-agg-period``) and the CSIVolumeHealth gate: read,
no longer warned about, shown by /configz, and handed to the http worker."""

from __future__ import annotations

from pathlib import Path

from pkletd.supervisor import config, workeroptions

from tests.supervisor.test_config import load, write


def test_the_period_from_the_file_and_the_flag(tmp_path: Path) -> None:
    default = load().config
    assert default.volume_stats_agg_period == 60.0
    assert workeroptions.http_options(default).volume_stats_period == 60.0
    result = load("--config", write(tmp_path, "volumeStatsAggPeriod: 15s\n"))
    assert result.warnings == ()
    assert config.v1beta1(result.config)["volumeStatsAggPeriod"] == "15s"
    flag = load("--volume-stats-agg-period=2m").config
    assert flag.volume_stats_agg_period == 120.0
    zero = load("--config", write(tmp_path, "volumeStatsAggPeriod: 0s\n")).config
    assert zero.volume_stats_agg_period == 60.0  # v1beta1 defaulting: zero is the default


def test_a_negative_period_turns_volume_stats_off(tmp_path: Path) -> None:
    off = load("--config", write(tmp_path, 'volumeStatsAggPeriod: "-1s"\n')).config
    assert off.volume_stats_agg_period == -1.0
    assert config.v1beta1(off)["volumeStatsAggPeriod"] == "-1s"
    assert workeroptions.http_options(off).volume_stats_period == -1.0
    assert load("--volume-stats-agg-period=-1m").config.volume_stats_agg_period == -60.0


def test_the_csi_volume_health_gate_reaches_the_http_worker(tmp_path: Path) -> None:
    assert not workeroptions.http_options(load().config).volume_health
    result = load("--feature-gates", "CSIVolumeHealth=true")
    assert result.warnings == ()  # it switches something now
    assert workeroptions.http_options(result.config).volume_health
