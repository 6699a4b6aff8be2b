"""Turn arbitrary titles into URL-friendly slugs."""

import re
import unicodedata

_UNSAFE = re.compile(r"[^a-z0-9]+")


def slugify(text, separator="-", max_length=None):
    """Lower-case ``text`` and replace what is not an ASCII letter or digit.

    Letters with accents and compatibility forms (full-width letters,
    ligatures) are first reduced to their ASCII base letters where Unicode
    defines one; other symbols are treated as unsafe.
    Each run of unsafe characters becomes one ``separator``, and the slug
    never starts or ends with it. ``max_length`` cuts the slug to at most
    that many characters.
    """
    slug = _UNSAFE.sub(separator, _to_ascii(text).lower()).strip(separator)
    if max_length is not None:
        slug = slug[:max_length].rstrip(separator)
    return slug


def _to_ascii(text):
    # NFKD splits "\u00e9" into "e" plus a combining accent and maps
    # compatibility characters to their plain forms; the encode step then
    # drops whatever is left outside ASCII.
    decomposed = unicodedata.normalize("NFKD", text)
    return decomposed.encode("ascii", "ignore").decode("ascii")
