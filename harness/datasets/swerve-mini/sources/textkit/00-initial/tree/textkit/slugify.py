"""Turn arbitrary titles into URL-friendly slugs."""

import re

_UNSAFE = re.compile(r"[^a-z0-9]")


def slugify(text, separator="-", max_length=None):
    """Lower-case ``text`` and replace what is not an ASCII letter or digit.

    Unsafe characters become ``separator``. ``max_length`` cuts the slug to
    at most that many characters.
    """
    slug = _UNSAFE.sub(separator, text.lower())
    if max_length is not None:
        slug = slug[:max_length]
    return slug
