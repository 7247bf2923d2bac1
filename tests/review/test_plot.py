"""The graph (--plot) with players' names in any script: drawn in fonts that have their characters, the characters
no installed font has left out, and no warning on the console."""

from __future__ import annotations

import gc
import warnings

import pytest
from review_support import COMMENTED_GAME, position, review_of, run_review

from gtp_engine import review as review_lib

pytest.importorskip("matplotlib")


def test_names_in_cjk_scripts_draw_without_warnings(tmp_path):
    # PB 山田太郎, PW Lee Sedol 이세돌
    review = review_of(COMMENTED_GAME.read_bytes(), [position(0.0, "E5", 0.0)] * 15)
    gc.collect()  # files earlier tests left to the collector would warn here, inside the block, not the plot's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        review_lib.plot(review, tmp_path / "graph.png")
    assert [str(w.message) for w in caught] == []
    assert (tmp_path / "graph.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def regular_fonts() -> dict[str, frozenset[str]]:
    """The characters of each font family's regular style, placeholder fonts (boxes, not characters) left out."""
    from matplotlib import font_manager

    return {font.name: review_lib._characters(font.fname) for font in font_manager.fontManager.ttflist
            if review_lib._regular(font) and not font.name.startswith("Last Resort")}


def test_the_title_leaves_out_only_what_no_installed_font_has():
    text = "山田太郎 Lee Sedol 이세돌 Müller W+R"
    missing, families = review_lib._title_fonts(text)
    assert missing <= set("山田太郎이세돌")  # Latin letters are in matplotlib's own fonts
    assert not any(missing & characters for characters in regular_fonts().values())
    assert not any(family.startswith("Last Resort") for family in families)
    if not missing:  # a font for the CJK characters is installed: it is among those the title falls back to
        assert len(families) > 1


def test_a_character_the_default_font_lacks_is_drawn_in_one_that_has_it(tmp_path):
    from matplotlib import font_manager

    default = review_lib._characters(font_manager.findfont(font_manager.FontProperties()))
    extra = sorted(c for characters in regular_fonts().values() for c in characters - default if c.isprintable())
    if not extra:
        pytest.skip("no installed font has a character that matplotlib's default font lacks")
    missing, families = review_lib._title_fonts(f"Lee {extra[0]}")
    assert not missing and len(families) == 2
    review = review_of(f"(;GM[1]SZ[9]PB[Lee {extra[0]}];B[ee])".encode(), [position(0.0, "E5", 0.0)] * 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        review_lib.plot(review, tmp_path / "graph.png")
    assert [str(w.message) for w in caught] == []
def test_the_command_prints_no_glyph_warning(tiny_onnx_model, tmp_path):
    done = run_review(str(COMMENTED_GAME), "-o", str(tmp_path / "out.sgf"), "--plot", str(tmp_path / "graph.png"),
                      "--visits", "2", "--weights", str(tiny_onnx_model))
    assert done.returncode == 0, done.stderr
    assert "Glyph" not in done.stderr and "Warning" not in done.stderr
    assert done.stderr.splitlines()[-1].endswith(f"graph to {tmp_path / 'graph.png'}")
