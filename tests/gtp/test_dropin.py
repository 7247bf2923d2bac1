"""The engine in place of KataGo or Leela Zero: their command lines, a name the user sets, their rule and option
commands (kata-set-rule, kgs-rules, kata-list-params, lz-setoption), the warning for a network on a board size it
was not trained for, and --weights following --precision. Over pipes, as a GUI starts the engine."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from engine_process import ROOT

from gtp_engine.__main__ import load_config
from gtp_engine.evaluator import UniformEvaluator
from gtp_engine.player import Player

KATAGO_CONFIG = """# a KataGo GTP config, as KataGo ships them
logDir = gtp_logs
logAllGTPCommunication = true
rules = japanese
maxVisits = 500
numSearchThreads = 2
ponderingEnabled = false
allowResignation = true
resignThreshold = -0.90
nnCacheSizePowerOfTwo = 20
"""


def run_to_exit(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gtp_engine", *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_katago_command_line(engine, tiny_onnx_model, tmp_path):
    config = tmp_path / "gtp.cfg"
    config.write_text(KATAGO_CONFIG)
    gtp = engine("gtp", "-model", str(tiny_onnx_model), "-config", str(config), "-override-config", "maxVisits=10",
                 "--device", "cpu")
    assert gtp.ok("name") == "gtp_engine"
    assert gtp.ok("kata-get-param maxVisits") == "10"  # the override wins over the file
    assert '"scoring":"TERRITORY"' in gtp.ok("kata-get-rules")  # rules = japanese
    gtp.ok("boardsize 9")
    assert gtp.ok("genmove b")
    gtp.ok("quit")
    assert gtp.close() == 0
    warnings = [line for line in gtp.stderr_text().splitlines() if "ignored" in line]
    assert len(warnings) == 1 and warnings[0].endswith(
        "config keys that do not apply to gtp_engine, ignored: logDir, logAllGTPCommunication, nnCacheSizePowerOfTwo")


def test_katago_command_line_with_a_katago_network_and_our_options(engine, tmp_path):
    gtp = engine("gtp", "-model", str(tmp_path / "kata1-b18c384.bin.gz"), "-override-config",
                 "rules=aga-button,maxTime=2", "--name", "KataGo", "--visits", "7")
    assert gtp.ok("name") == "KataGo"  # our options follow KataGo's and win over its config
    assert gtp.ok("kata-get-param maxTime") == "2" and gtp.ok("kata-get-param maxVisits") == "7"
    assert gtp.ok("kata-get-rules").endswith('"hasButton":false,"whiteHandicapBonus":"N-1","friendlyPassOk":true}')  # aga, the nearest
    gtp.ok("quit")
    stderr = gtp.stderr_text()
    assert "kata1-b18c384.bin.gz is a KataGo network, which gtp_engine cannot read; using the shipped network" in stderr
    assert "the button is not played; scored as aga" in stderr


@pytest.mark.parametrize("args, message", [
    (["-override-config", "maxVisits=many"], "config key maxVisits: expected a positive integer, got 'many'"),
    (["-override-config", "rules=backgammon"], "config key rules: unknown rules 'backgammon'"),
    (["-override-config", "allowResignation=perhaps"], "config key allowResignation: expected on or off"),
    (["-override-config", "maxVisits"], "-override-config: expected key=value, got 'maxVisits'"),
    (["-config", "missing.cfg"], "cannot read config file missing.cfg"),
])
def test_a_bad_katago_configuration_is_refused_with_its_key(args, message):
    result = run_to_exit("gtp", *args)
    assert result.returncode == 2 and message in result.stderr and not result.stdout


def test_katago_resignation_and_rule_keys():
    from gtp_engine.config import from_katago_gtp

    options, ignored, notes = from_katago_gtp({"resignThreshold": "-0.9", "resignConsecTurns": "3",
                                               "koRule": "SIMPLE", "scoringRule": "TERRITORY", "taxRule": "SEKI",
                                               "multiStoneSuicideLegal": "false", "whiteHandicapBonus": "0",
                                               "logSearchInfo": "true", "logToStderr": "true", "lagBuffer": "0.5",
                                               "useLcbForSelection": "false"})
    assert options == {"resign-threshold": 0.05, "resign-consecutive": 3, "rules": "japanese", "log-level": "info",
                       "lag-buffer": 0.5, "lcb": False}
    assert ignored == notes == []
    options, _, _ = from_katago_gtp({"logSearchInfo": "true", "logToStderr": "false"})  # KataGo logs to a file
    assert options == {}
    options, _, _ = from_katago_gtp({"resignThreshold": "-0.9", "allowResignation": "false", "rules": "chinese-ogs"})
    assert options == {"resign-threshold": 0.0, "rules": "chinese"}
    options, _, _ = from_katago_gtp({"koRule": "SIMPLE", "scoringRule": "AREA"})
    assert options["rules"].startswith('{"ko": "SIMPLE", "scoring": "AREA"')  # no rule set of that name: as JSON


def test_leela_zero_flags_map_onto_the_options(tiny_onnx_model):
    config = load_config(["-w", "net.onnx", "-t", "1", "-v", "10", "-p", "20", "-s", "3", "-g", "--noponder",
                          "-r", "7", "--lagbuffer", "50", "-q"])
    assert (config.network.weights, config.network.threads, config.seed) == ("net.onnx", 1, 3)
    assert (config.move_limits.visits, config.move_limits.playouts) == (10, 20)
    assert (config.play.ponder, config.play.lag_buffer, config.log_level) == (False, 0.5, "error")
    assert config.player.resign.winrate == pytest.approx(0.07)
    assert load_config(["-r", "-1"]).player.resign.winrate == load_config([]).player.resign.winrate
    assert load_config(["--resignpct", "0"]).player.resign.winrate == 0


def test_leela_zero_command_line_over_pipes(engine, tiny_onnx_model):
    gtp = engine("-w", str(tiny_onnx_model), "-t", "1", "-v", "10", "--noponder", "-g", "--device", "cpu")
    assert gtp.ok("kata-get-param maxVisits") == "10"
    gtp.ok("boardsize 9")
    assert gtp.ok("genmove b")
    gtp.ok("quit")
    assert gtp.close() == 0


def test_help_and_version_still_answer():
    result = run_to_exit("-h")
    assert result.returncode == 0 and "-w FILE, --weights FILE" in result.stdout and "--noponder" in result.stdout
    assert "--name NAME" in result.stdout and "KataGo mode" in result.stdout
    assert run_to_exit("--help").stdout == result.stdout
    version = run_to_exit("--version")
    assert version.returncode == 0 and version.stdout.startswith("gtp_engine ")
    katago = run_to_exit("gtp", "-h")
    assert katago.returncode == 0 and "-override-config" in katago.stdout


def test_the_name_the_user_sets(engine, tmp_path):
    assert engine().ok("name") == "gtp_engine"
    assert engine("--name", "KataGo").ok("name") == "KataGo"
    config = tmp_path / "engine.toml"
    config.write_text('name = "KataGo v1.16"\n')
    assert engine("--config", str(config)).ok("name") == "KataGo v1.16"


def test_kata_set_rule_changes_one_field(engine):
    gtp = engine()
    gtp.ok("kata-set-rule ko SIMPLE")
    assert gtp.ok("kata-get-rules") == ('{"ko":"SIMPLE","scoring":"AREA","suicide":false,"tax":"NONE",'
                                        '"hasButton":false,"whiteHandicapBonus":"N","friendlyPassOk":true}')
    gtp.ok("kata-set-rule scoring territory")  # the tax becomes the scoring's own
    assert '"scoring":"TERRITORY","suicide":false,"tax":"SEKI"' in gtp.ok("kata-get-rules")
    gtp.ok("kata-set-rule tax ALL")
    assert '"scoring":"TERRITORY","suicide":false,"tax":"ALL"' in gtp.ok("kata-get-rules")
    gtp.ok("kata-set-rule tax SEKI")
    gtp.ok("kata-set-rule whiteHandicapBonus 0")
    gtp.ok("kata-set-rule friendlyPassOk true")  # changes nothing that is played
    assert gtp.ok("kata-get-rules").endswith('"whiteHandicapBonus":"0","friendlyPassOk":true}')
    for text, error in [("kata-set-rule hasButton true", "cannot use these rules: hasButton: the button is not played"),
                        ("kata-set-rule ko SPIGHT", "cannot use these rules: ko SPIGHT"),
                        ("kata-set-rule suicide perhaps", "syntax error"),
                        ("kata-set-rule ko", "syntax error"),
                        ("kata-set-rule komi 7", "unknown rule 'komi'; known: ko, scoring, tax, suicide")]:
        reply = gtp(text)
        assert not reply.ok and reply.text.startswith(error), (text, reply.text)
    assert '"ko":"SIMPLE","scoring":"TERRITORY"' in gtp.ok("kata-get-rules")  # a refusal changes nothing


def test_kgs_rules(engine):
    gtp = engine()
    for name, expected in [("japanese", '"ko":"SIMPLE","scoring":"TERRITORY"'),
                           ("new_zealand", '"ko":"SITUATIONAL","scoring":"AREA","suicide":true'),
                           ("aga", '"whiteHandicapBonus":"N-1"'),
                           ("chinese", '"ko":"POSITIONAL","scoring":"AREA","suicide":false')]:
        gtp.ok(f"kgs-rules {name}")
        assert expected in gtp.ok("kata-get-rules"), name
    reply = gtp("kgs-rules ing")
    assert not reply.ok and reply.text == "unknown rules 'ing'; known: japanese, chinese, aga, new_zealand"
    assert not gtp("kgs-rules").ok


def test_kata_list_params_names_what_kata_get_param_takes(engine):
    gtp = engine()
    params = gtp.ok("kata-list-params").split(" ")
    assert params == ["maxVisits", "maxPlayouts", "maxTime", "strength", "humanSLProfile"]
    for param in params[:3]:
        assert gtp.ok(f"kata-get-param {param}") == "-1"
    assert gtp.ok("kata-get-param strength") == "max"
    commands = gtp.ok("list_commands").split("\n")
    assert {"kata-set-rule", "kgs-rules", "kata-list-params", "lz-setoption"} <= set(commands)


def test_lz_setoption(engine):
    gtp = engine("--visits", "50")
    listing = gtp.ok("lz-setoption").split("\n")
    assert listing[0] == "option name Visits type spin default 50 min 0 max 1000000000"
    assert "option name Pondering type check default false" in listing
    gtp.ok("lz-setoption name Visits value 12")
    assert gtp.ok("kata-get-param maxVisits") == "12"
    gtp.ok("lz-setoption name visits value 0")  # Leela Zero's "no limit"
    assert gtp.ok("kata-get-param maxVisits") == "-1"
    gtp.ok("lz-setoption name Playouts value 30")
    assert gtp.ok("kata-get-param maxPlayouts") == "30"
    gtp.ok("lz-setoption name Lagbuffer value 150")
    gtp.ok("lz-setoption name Pondering value true")
    gtp.ok("lz-setoption name Resign Percentage value 3")
    listing = gtp.ok("lz-setoption").split("\n")
    assert "option name Lagbuffer type spin default 150 min 0 max 3000" in listing
    assert "option name Resign Percentage type spin default 3 min -1 max 99" in listing
    assert "option name Pondering type check default true" in listing
    gtp.ok("lz-setoption name Resign Percentage value -1")
    assert "option name Resign Percentage type spin default -1 min -1 max 99" in gtp.ok("lz-setoption")
    for text, error in [("lz-setoption name Maximum Memory Use (MiB) value 512",
                         "unknown option 'maximum memory use (mib)'; known: visits, playouts"),
                        ("lz-setoption name Visits value many", "syntax error"),
                        ("lz-setoption name Pondering value maybe", "syntax error"),
                        ("lz-setoption name Resign Percentage value 120", "syntax error"),
                        ("lz-setoption Visits 5", "syntax error"),
                        ("lz-setoption name Visits", "syntax error")]:
        reply = gtp(text)
        assert not reply.ok and reply.text.startswith(error), (text, reply.text)


def test_resign_below_overrides_the_configured_threshold_until_reset_to_it():
    player = Player(UniformEvaluator())
    configured = player.config.resign
    player.resign_below(0.2)
    assert player.config.resign.winrate == 0.2 and player.config.resign.consecutive == configured.consecutive
    player.resign_below(0)
    assert player.config.resign.winrate == 0
    player.resign_below(None)
    assert player.config.resign == configured


def test_a_network_on_a_size_it_was_not_trained_for_warns_once_per_size(engine, trained_network):
    gtp = engine("--weights", str(trained_network(9)), "--device", "cpu", "--visits", "4")
    for size in (13, 13, 9, 11):
        gtp.ok(f"boardsize {size}")
        gtp.ok("genmove b")
    gtp.ok("quit")
    assert gtp.close() == 0
    warnings = [line for line in gtp.stderr_text().splitlines() if "was not trained on" in line]
    assert len(warnings) == 2, warnings  # the default log level shows them
    assert warnings[0].endswith("network trained.onnx (tiny, fp32, features v1, trained on 9x9) was not trained on "
                                "13x13 boards")
    assert warnings[1].endswith("was not trained on 11x11 boards")


def test_weights_follow_precision(engine, tiny_onnx_model, tiny_int8_model, tmp_path):
    shutil.copy(tiny_onnx_model, tmp_path / "net.onnx")
    shutil.copy(tiny_int8_model, tmp_path / "net.int8.onnx")
    for precision, loaded in [("auto", "net.int8.onnx (tiny, int8,"), ("int8", "net.int8.onnx (tiny, int8,"),
                              ("fp32", "net.onnx (tiny, fp32,")]:
        gtp = engine("--weights", str(tmp_path / "net.onnx"), "--precision", precision, "--device", "cpu",
                     "--visits", "2", "--log-level", "info")
        gtp.ok("boardsize 9")
        gtp.ok("genmove b")
        gtp.ok("quit")
        gtp.close()
        assert f"network {loaded}" in gtp.stderr_text(), precision
