"""Shorten text for previews and table cells."""

PLACEHOLDER = "..."


def truncate(text, width, placeholder=PLACEHOLDER):
    """Return ``text`` cut to at most ``width`` characters.

    When the text has to be cut it ends with ``placeholder``, and the cut is
    made at a word boundary when there is one. When ``width`` leaves no room
    for any text, the result is the placeholder cut to ``width``.
    """
    if len(text) <= width:
        return text
    room = width - len(placeholder)
    if room <= 0:
        return placeholder[:width]
    cut = text[:room]
    if text[room] != " " and " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip() + placeholder
