"""Configuration: option layers, validation messages, config files."""

import pytest

from gtp_engine import config
from gtp_engine.config import ConfigError


def test_later_layers_win_and_values_are_typed():
    built = config.build({"visits": 100, "ponder": "off", "rules": "japanese"}, {"visits": "200", "time": "1.5"})
    assert built.search.visits == 200
    assert built.search.time_per_move == 1.5
    assert built.play.ponder is False
    assert built.play.rules == "japanese"
    assert built.network == config.NetworkConfig()


@pytest.mark.parametrize(
    "layer, words",
    [
        ({"visits": "0"}, "--visits"),
        ({"visits": True}, "--visits"),
        ({"time": "-1"}, "--time"),
        ({"resign-threshold": "1.0"}, "--resign-threshold"),
        ({"device": "gpu"}, "--device"),
        ({"log-level": "loud"}, "--log-level"),
        ({"colour": "black"}, "unknown option 'colour'"),
    ],
)
def test_bad_values_name_the_option(layer, words):
    with pytest.raises(ConfigError, match=words):
        config.build(layer)


def test_config_file_keys_match_the_flags(tmp_path):
    path = tmp_path / "engine.toml"
    path.write_text('visits = 50\nlag_buffer = 0\ndevice = "cpu"\n')
    built = config.build(config.load_file(path))
    assert (built.search.visits, built.play.lag_buffer, built.network.device) == (50, 0.0, "cpu")
    path.write_text("visitz = 50\n")
    with pytest.raises(ConfigError, match="unknown option 'visitz'"):
        config.load_file(path)
    path.write_text("visits = = 3\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.load_file(path)
    with pytest.raises(ConfigError, match="cannot read"):
        config.load_file(tmp_path / "missing.toml")
