"""A read-only view over parsed INI data with typed getters."""

from .errors import MissingOptionError
from .parser import DEFAULT_SECTION, parse

_MISSING = object()


class Config:
    """Parsed configuration; lookups fall back to the DEFAULT section."""

    def __init__(self, sections):
        self._sections = sections

    @classmethod
    def from_string(cls, text):
        return cls(parse(text))

    @classmethod
    def from_file(cls, path, encoding="utf-8"):
        with open(path, encoding=encoding) as fh:
            return cls.from_string(fh.read())

    def sections(self):
        """Section names in file order, without DEFAULT."""
        return [name for name in self._sections if name != DEFAULT_SECTION]

    def has_option(self, section, key):
        return self.get(section, key, None) is not None

    def get(self, section, key, default=_MISSING):
        key = key.lower()
        values = self._sections.get(section, {})
        if key in values:
            return values[key]
        defaults = self._sections.get(DEFAULT_SECTION, {})
        if key in defaults:
            return defaults[key]
        if default is _MISSING:
            raise MissingOptionError(section, key)
        return default

    def getint(self, section, key, default=_MISSING):
        value = self.get(section, key, default)
        if value is default:
            return value
        return int(value)

    def getbool(self, section, key, default=_MISSING):
        value = self.get(section, key, default)
        if value is default:
            return value
        if value == "true":
            return True
        if value == "false":
            return False
        raise ValueError(f"not a boolean: {value!r}")
