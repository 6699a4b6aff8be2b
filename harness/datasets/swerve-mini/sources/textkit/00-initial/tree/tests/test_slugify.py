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
