"""Inclusive ranges of calendar dates."""

import datetime as dt

from .interval import Interval

ONE_DAY = dt.timedelta(days=1)


class DateRange:
    """All dates from ``first`` to ``last``, both included."""

    __slots__ = ("first", "last")

    def __init__(self, first, last):
        if last < first:
            raise ValueError(f"last {last} is before first {first}")
        self.first = first
        self.last = last

    @classmethod
    def parse(cls, text):
        """Parse ``"YYYY-MM-DD..YYYY-MM-DD"``."""
        first, sep, last = text.partition("..")
        if not sep:
            raise ValueError(f"expected 'FIRST..LAST', got {text!r}")
        return cls(dt.date.fromisoformat(first.strip()), dt.date.fromisoformat(last.strip()))

    def __repr__(self):
        return f"DateRange({self.first.isoformat()}..{self.last.isoformat()})"

    def __eq__(self, other):
        if not isinstance(other, DateRange):
            return NotImplemented
        return (self.first, self.last) == (other.first, other.last)

    def __hash__(self):
        return hash((self.first, self.last))

    def __len__(self):
        # Both ends are included: a range from a day to itself has one day.
        return (self.last - self.first).days + 1

    def __iter__(self):
        day = self.first
        while day <= self.last:
            yield day
            day += ONE_DAY

    def __contains__(self, day):
        return self.first <= day <= self.last

    def to_interval(self):
        """The half-open interval of dates ``[first, last + 1 day)``."""
        return Interval(self.first, self.last + ONE_DAY)

    def overlaps(self, other):
        """True when both ranges have at least one day in common."""
        return self.to_interval().overlaps(other.to_interval())
