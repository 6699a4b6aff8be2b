"""Half-open intervals and inclusive date ranges."""

from .daterange import DateRange
from .interval import Interval, merge

__version__ = "0.1.0"

__all__ = ["DateRange", "Interval", "merge"]
