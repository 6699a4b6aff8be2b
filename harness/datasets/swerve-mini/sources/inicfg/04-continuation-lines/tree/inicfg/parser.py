"""Parse INI-style text into nested dictionaries."""

from .errors import ParseError

COMMENT_PREFIXES = ("#", ";")
DEFAULT_SECTION = "DEFAULT"


def parse(text):
    """Parse ``text`` and return ``{section: {key: value}}``.

    Keys are lower-cased; values keep their case and lose surrounding
    whitespace. Keys that appear before any section header go in the
    ``"DEFAULT"`` section, which is always present.

    An indented line continues the value of the option above it; the
    pieces are joined with newlines.
    """
    sections = {DEFAULT_SECTION: {}}
    current = sections[DEFAULT_SECTION]
    last_key = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(COMMENT_PREFIXES):
            continue
        if raw[0].isspace() and last_key is not None:
            previous = current[last_key]
            current[last_key] = f"{previous}\n{line}" if previous else line
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                raise ParseError("unterminated section header", lineno, raw)
            name = line[1:-1].strip()
            if not name:
                raise ParseError("empty section name", lineno, raw)
            current = sections.setdefault(name, {})
            last_key = None
            continue
        if "=" not in line:
            raise ParseError("expected 'key = value'", lineno, raw)
        key, _, value = line.partition("=")
        key = key.strip().lower()
        if not key:
            raise ParseError("empty key", lineno, raw)
        current[key] = value.strip()
        last_key = key
    return sections
