import pytest

from textkit import average_word_length, reading_time, sentence_count, word_count


def test_word_count_simple():
    assert word_count("one two three") == 3


def test_word_count_of_empty_text_is_zero():
    assert word_count("") == 0
    assert word_count("   ") == 0


def test_word_count_ignores_repeated_spaces():
    assert word_count("one  two   three ") == 3


def test_word_count_splits_on_newlines_and_tabs():
    assert word_count("one\ntwo\tthree") == 3


def test_sentence_count():
    assert sentence_count("Hi. How are you? Fine!") == 3


def test_sentence_count_counts_trailing_fragment():
    assert sentence_count("One. And a fragment") == 2


def test_average_word_length():
    assert average_word_length("a bb ccc") == 2.0


def test_average_word_length_ignores_punctuation():
    assert average_word_length("Hi, you!") == pytest.approx(2.5)


def test_average_word_length_of_empty_text():
    assert average_word_length("") == 0.0


def test_reading_time_rounds_up():
    assert reading_time(" ".join(["word"] * 201)) == 2


def test_reading_time_of_empty_text_is_zero():
    assert reading_time("") == 0


def test_reading_time_custom_speed():
    assert reading_time(" ".join(["word"] * 100), words_per_minute=50) == 2
