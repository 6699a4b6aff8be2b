import pytest

from inicfg import ParseError, parse


def test_empty_text_has_only_default():
    assert parse("") == {"DEFAULT": {}}


def test_simple_section():
    text = "[server]\nhost = example.org\nport = 8080\n"
    assert parse(text)["server"] == {"host": "example.org", "port": "8080"}


def test_keys_are_lowercased_values_keep_case():
    assert parse("[s]\nUser = Alice\n")["s"] == {"user": "Alice"}


def test_values_are_stripped():
    assert parse("[s]\nname =    padded value   \n")["s"]["name"] == "padded value"


def test_comments_and_blank_lines_are_ignored():
    text = "# top comment\n\n[s]\n; another comment\na = 1\n\n"
    assert parse(text) == {"DEFAULT": {}, "s": {"a": "1"}}


def test_keys_before_any_section_go_to_default():
    assert parse("a = 1\n[s]\nb = 2\n") == {"DEFAULT": {"a": "1"}, "s": {"b": "2"}}


def test_repeated_key_last_one_wins():
    assert parse("[s]\na = 1\na = 2\n")["s"] == {"a": "2"}


def test_unterminated_section_header_raises():
    with pytest.raises(ParseError, match="unterminated"):
        parse("[server\n")


def test_missing_equals_reports_line_number():
    with pytest.raises(ParseError) as info:
        parse("[s]\na = 1\njust some words\n")
    assert info.value.lineno == 3


def test_empty_key_raises():
    with pytest.raises(ParseError, match="empty key"):
        parse("[s]\n = value\n")
