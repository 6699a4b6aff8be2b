"""A tiny INI-style configuration parser."""

from .config import Config
from .errors import DuplicateSectionError, InicfgError, MissingOptionError, ParseError
from .parser import parse

__version__ = "0.2.0"

__all__ = [
    "Config",
    "DuplicateSectionError",
    "InicfgError",
    "MissingOptionError",
    "ParseError",
    "parse",
]
