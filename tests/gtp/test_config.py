"""Configuration: option layers, validation messages, config files."""

import dataclasses

import pytest

from gtp_engine import config
from gtp_engine.config import ConfigError


def test_later_layers_win_and_values_are_typed():
    built = config.build({"visits": 100, "ponder": "off", "rules": "japanese"}, {"visits": "200", "time": "1.5"})
    assert built.move_limits.visits == 200
    assert built.move_limits.time_per_move == 1.5
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
        ({"rules": "backgammon"}, "--rules: unknown rules 'backgammon'"),
        ({"rules": '{"scoring": "AREA", "tax": "HALF"}'}, "--rules: .*tax"),
        ({"rules": {"scoring": "AREA", "hasButton": True}}, "--rules: hasButton"),
    ],
)
def test_bad_values_name_the_option(layer, words):
    with pytest.raises(ConfigError, match=words):
        config.build(layer)


def test_config_file_keys_match_the_flags(tmp_path):
    path = tmp_path / "engine.toml"
    path.write_text('visits = 50\nlag_buffer = 0\ndevice = "cpu"\n')
    built = config.build(config.load_file(path))
    assert (built.move_limits.visits, built.play.lag_buffer, built.network.device) == (50, 0.0, "cpu")
    path.write_text("visitz = 50\n")
    with pytest.raises(ConfigError, match="unknown option 'visitz'"):
        config.load_file(path)
    path.write_text("visits = = 3\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.load_file(path)
    with pytest.raises(ConfigError, match="cannot read"):
        config.load_file(tmp_path / "missing.toml")
    path.write_bytes(b"\xff\xfev\x00")  # UTF-16, not UTF-8
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.load_file(path)


@pytest.mark.parametrize("text, words", [
    ("seed = -1\n", "engine.toml: seed: expected an integer >= 0"),  # TOML integers may be negative
    ("evaluation-threads = -1\n", "engine.toml: evaluation-threads"),
    ("visits = 0\n", "engine.toml: visits: expected a positive integer"),
    ('[analysis]\nc-puct = "x"\n', r"engine.toml: \[analysis\] c-puct"),
])
def test_a_bad_value_in_the_config_file_names_the_file_and_its_key(tmp_path, text, words):
    path = tmp_path / "engine.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=words):
        config.load_file(path)


def test_rules_are_a_name_or_katagos_json_object_also_as_a_toml_table(tmp_path):
    from gtp_engine.game import Rules

    assert config.build({"rules": "stone_scoring"}).play.rules == "stone_scoring"
    path = tmp_path / "engine.toml"
    path.write_text('rules = {scoring = "TERRITORY", ko = "SIMPLE", tax = "NONE", suicide = false}\n')
    rules = Rules.from_katago(config.build(config.load_file(path)).play.rules)
    assert (rules.scoring, rules.ko, rules.tax, rules.suicide_allowed) == ("territory", "simple", "none", False)


def leaf_paths(config, prefix=()):
    """The paths of every non-dataclass field below a frozen dataclass."""
    paths = []
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            paths += leaf_paths(value, prefix + (field.name,))
        else:
            paths.append(prefix + (field.name,))
    return paths


def test_every_search_and_player_setting_has_an_option():
    targets = {option.target for option in config.OPTIONS}
    player = config.EngineConfig().player
    wanted = {("player",) + path for path in leaf_paths(player)} - {("player", "analysis")}
    wanted -= {("player", "search", "seed")}  # the engine's one --seed
    assert wanted - targets == set()
    assert ("seed",) in targets


def test_search_options_set_genmove_and_analysis_and_the_analysis_table_overrides(tmp_path):
    path = tmp_path / "engine.toml"
    path.write_text('c-puct = 1.5\nlcb = "off"\nseed = 7\nresign-consecutive = 3\n\n'
                    '[analysis]\nc_puct = 2.5\nroot-fpu-reduction = 0\nbatch = 16\n')
    built = config.build(config.load_file(path), {"analysis-lcb-z": "4", "noise-fraction": "0.25"})
    genmove, analysis = built.player.search, built.player.analysis_search
    assert (genmove.tree.c_puct, genmove.choice.lcb, genmove.noise.fraction, genmove.seed) == (1.5, False, 0.25, 7)
    assert (analysis.tree.c_puct, analysis.tree.root_fpu_reduction, analysis.batch_size) == (2.5, 0.0, 16)
    # What the analysis table leaves alone follows the genmove search.
    assert (analysis.choice.lcb, analysis.choice.lcb_z, analysis.noise.fraction, analysis.seed) == (False, 4.0, 0.25, 7)
    assert genmove.choice.lcb_z == 3.0 and built.player.resign.consecutive == 3
    assert config.build().player.analysis is None  # no override: analysis searches as genmove does


def test_the_analysis_table_takes_search_options_only(tmp_path):
    path = tmp_path / "engine.toml"
    path.write_text("[analysis]\nvisits = 100\n")
    with pytest.raises(ConfigError, match="search options only"):
        config.load_file(path)
    with pytest.raises(ConfigError, match="--analysis-c-puct"):
        config.build({"analysis": {"c-puct": "-1"}})
    with pytest.raises(ConfigError, match="--resign-consecutive"):
        config.build({"resign-consecutive": "0"})


def test_the_network_threads_share_the_cores_with_the_search_thread_when_batches_overlap():
    # 4 in flight by default: the cores but one evaluate (at most 3), the search thread evaluates too
    assert config.build({}).player.search.evaluation_threads_for(2) == 1
    assert config.build({}).network_threads(cores=2) == 1  # one evaluation thread and the search thread: a core each
    assert config.build({}).network_threads(cores=16) == 4  # three evaluation threads and the search thread
    assert config.build({}).network_threads(cores=1) == 1
    assert config.build({"batches-in-flight": "2"}).network_threads(cores=16) == 8
    assert config.build({"evaluation-threads": "2"}).network_threads(cores=16) == 5
    assert config.build({"evaluation-threads": "0"}).network_threads(cores=16) == 0  # each batch in turn
    assert config.build({"batches-in-flight": "1"}).network_threads(cores=16) == 0  # onnxruntime's own choice
    assert config.build({"threads": "3", "batches-in-flight": "2"}).network_threads(cores=16) == 3
    assert config.build({"batches-in-flight": "3"}).player.search.batches_in_flight == 3
