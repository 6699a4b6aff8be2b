import pytest

from textkit import truncate

TEXT = "hello brave new world"


def test_short_text_is_unchanged():
    assert truncate("hi", 10) == "hi"


def test_text_of_exactly_width_is_unchanged():
    assert truncate("hello", 5) == "hello"


def test_cuts_at_word_boundary():
    assert truncate(TEXT, 13) == "hello..."


def test_keeps_word_that_ends_at_the_cut():
    assert truncate(TEXT, 14) == "hello brave..."


def test_long_word_is_cut_inside():
    assert truncate("supercalifragilistic", 10) == "superca..."


def test_custom_placeholder():
    assert truncate(TEXT, 12, placeholder="\u2026") == "hello brave\u2026"


@pytest.mark.parametrize("width", [8, 10, 15])
def test_result_fits_width(width):
    assert len(truncate(TEXT, width)) <= width


@pytest.mark.parametrize("width", [0, 2, 3])
def test_tiny_width_never_exceeds_width(width):
    result = truncate(TEXT, width)
    assert len(result) <= width
    assert result == "..."[:width]
