"""Half-open intervals over any ordered values."""


class Interval:
    """The half-open interval ``[start, end)``.

    ``start`` and ``end`` may be any mutually comparable values: numbers,
    dates, datetimes. An interval with ``start == end`` is empty.
    """

    __slots__ = ("start", "end")

    def __init__(self, start, end):
        if end < start:
            raise ValueError(f"end {end!r} is before start {start!r}")
        self.start = start
        self.end = end

    def __repr__(self):
        return f"Interval({self.start!r}, {self.end!r})"

    def __eq__(self, other):
        if not isinstance(other, Interval):
            return NotImplemented
        return (self.start, self.end) == (other.start, other.end)

    def __hash__(self):
        return hash((self.start, self.end))

    def __contains__(self, value):
        return self.start <= value < self.end

    @property
    def length(self):
        return self.end - self.start

    def is_empty(self):
        return self.start == self.end

    def overlaps(self, other):
        """True when the two intervals share at least one point.

        Intervals are half-open, so ``[1, 3)`` and ``[3, 5)`` only touch.
        """
        return self.start < other.end and other.start < self.end

    def intersection(self, other):
        """The part that both intervals have in common, or None."""
        if not self.overlaps(other):
            return None
        return Interval(max(self.start, other.start), min(self.end, other.end))


def merge(intervals):
    """Merge overlapping or touching intervals into a sorted list."""
    merged = []
    for interval in intervals:
        # Touching intervals merge too, so this is not overlaps().
        if merged and interval.start <= merged[-1].end:
            last = merged[-1]
            merged[-1] = Interval(last.start, max(last.end, interval.end))
        else:
            merged.append(interval)
    return merged
