"""Small text helpers: slugs, statistics, truncation."""

from .shorten import truncate
from .slugify import slugify
from .stats import average_word_length, reading_time, sentence_count, word_count

__version__ = "0.1.0"

__all__ = [
    "average_word_length",
    "reading_time",
    "sentence_count",
    "slugify",
    "truncate",
    "word_count",
]
