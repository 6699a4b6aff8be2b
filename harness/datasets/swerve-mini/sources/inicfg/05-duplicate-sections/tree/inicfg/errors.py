"""Exceptions raised by inicfg."""


class InicfgError(Exception):
    """Base class for every error raised by inicfg."""


class ParseError(InicfgError):
    """The text is not valid INI; ``lineno`` is 1-based."""

    def __init__(self, message, lineno, line):
        super().__init__(f"line {lineno}: {message}: {line!r}")
        self.message = message
        self.lineno = lineno
        self.line = line


class DuplicateSectionError(ParseError):
    """A section header appears twice in the same text."""

    def __init__(self, section, lineno, line, first_lineno):
        super().__init__(
            f"section {section!r} already defined on line {first_lineno}", lineno, line
        )
        self.section = section
        self.first_lineno = first_lineno


class MissingOptionError(InicfgError, LookupError):
    """The option is neither in the section nor in DEFAULT."""

    def __init__(self, section, key):
        super().__init__(f"no option {key!r} in section {section!r}")
        self.section = section
        self.key = key
