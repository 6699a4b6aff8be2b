"""Shorten text for previews and table cells."""

PLACEHOLDER = "..."


def truncate(text, width, placeholder=PLACEHOLDER):
    """Return ``text`` cut to at most ``width`` characters.

    When the text has to be cut it ends with ``placeholder``, and the cut is
    made at a word boundary when there is one.
    """
    if len(text) < width:
        return text
    room = width - len(placeholder)
    cut = text[:room]
    if text[room] != " " and " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip() + placeholder
