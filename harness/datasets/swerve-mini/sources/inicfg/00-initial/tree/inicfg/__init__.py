"""A tiny INI-style configuration parser."""

from .config import Config
from .errors import InicfgError, MissingOptionError, ParseError
from .parser import parse

__version__ = "0.1.0"

__all__ = ["Config", "InicfgError", "MissingOptionError", "ParseError", "parse"]
