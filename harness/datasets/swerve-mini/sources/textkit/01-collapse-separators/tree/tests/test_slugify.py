import pytest

from textkit import slugify


def test_lowercases():
    assert slugify("Hello") == "hello"


def test_space_becomes_separator():
    assert slugify("hello world") == "hello-world"


def test_digits_are_kept():
    assert slugify("Top 10") == "top-10"


def test_custom_separator():
    assert slugify("a b", separator="_") == "a_b"


def test_max_length():
    assert slugify("abcdef", max_length=3) == "abc"


def test_empty_text():
    assert slugify("") == ""


def test_existing_slug_is_unchanged():
    assert slugify("already-a-slug") == "already-a-slug"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", "plain"),
        ("Hello, World!", "hello-world"),
        ("a   b", "a-b"),
        ("  --Title--  ", "title"),
    ],
    ids=["plain", "punctuation", "spaces", "edges"],
)
def test_runs_of_unsafe_characters_collapse(text, expected):
    assert slugify(text) == expected


def test_max_length_does_not_leave_trailing_separator():
    assert slugify("hello world", max_length=6) == "hello"
