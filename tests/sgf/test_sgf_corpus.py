"""Every file of ../shared/data/sgf_parser_tests.tar.xz either loads or raises SgfError, and what loads round-trips."""

import dataclasses
import tarfile
from pathlib import Path

import pytest

from gtp_engine.sgf_io import GameRecord, SgfError, load_sgf, save_sgf

ARCHIVE = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "sgf_parser_tests.tar.xz"
NOT_GAME_RECORDS = (".html", ".md", ".txt", "LICENSE")


def corpus() -> list[tuple[str, bytes]]:
    if not ARCHIVE.exists():
        return []
    with tarfile.open(ARCHIVE) as archive:
        return [
            (member.name, archive.extractfile(member).read())
            for member in archive.getmembers()
            if member.isfile() and not member.name.endswith(NOT_GAME_RECORDS)
        ]


FILES = corpus()
pytestmark = pytest.mark.skipif(not FILES, reason=f"{ARCHIVE} is absent (shared data not checked out)")


def comparable(record: GameRecord) -> dict:
    fields = dataclasses.asdict(record)
    del fields["source"]
    fields["setup"] = sorted(fields["setup"])
    return fields


def test_corpus_is_the_expected_one():
    assert len(FILES) >= 80


@pytest.mark.parametrize("name, data", FILES, ids=[name for name, _ in FILES])
def test_file_loads_or_raises_sgf_error_and_round_trips(name, data):
    try:
        record = load_sgf(data, source=name)
    except SgfError as e:
        assert str(e).startswith(f"{name}: {e.reason}")
        return
    again = load_sgf(record.to_sgf(), source="saved record")
    assert comparable(again) == comparable(record)

    try:
        game = record.to_game()
    except SgfError as e:
        assert e.reason.startswith(("illegal move", "illegal setup")) and name in str(e)
        return
    replayed = load_sgf(save_sgf(game, black=record.black, white=record.white), source="saved game").to_game()
    assert (replayed.width, replayed.height, replayed.komi) == (game.width, game.height, game.komi)
    assert sorted(replayed.setup) == sorted(game.setup)
    assert replayed.moves == game.moves
    assert replayed.board.colors == game.board.colors
    assert replayed.to_play == game.to_play
