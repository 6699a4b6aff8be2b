"""Simple statistics about a piece of prose."""

import re

WORDS_PER_MINUTE = 200

_SENTENCE_END = re.compile(r"[.!?]+")
_PUNCTUATION = ".,;:!?\"'()[]"


def word_count(text):
    """Number of words in ``text``."""
    return len(text.split(" "))


def sentence_count(text):
    """Number of sentences; a trailing fragment without a full stop counts."""
    return sum(1 for part in _SENTENCE_END.split(text) if part.strip())


def average_word_length(text):
    """Mean length of the words, ignoring surrounding punctuation."""
    words = [word.strip(_PUNCTUATION) for word in text.split()]
    words = [word for word in words if word]
    if not words:
        return 0.0
    return sum(map(len, words)) / len(words)


def reading_time(text, words_per_minute=WORDS_PER_MINUTE):
    """Estimated reading time in whole minutes, rounded up."""
    return -(-word_count(text) // words_per_minute)
