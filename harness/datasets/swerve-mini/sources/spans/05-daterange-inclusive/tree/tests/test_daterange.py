import datetime as dt

import pytest

from spans import DateRange, Interval

JAN = [None] + [dt.date(2024, 1, day) for day in range(1, 32)]


def test_parse():
    assert DateRange.parse("2024-01-01 .. 2024-01-31") == DateRange(JAN[1], JAN[31])


def test_parse_requires_separator():
    with pytest.raises(ValueError, match="FIRST..LAST"):
        DateRange.parse("2024-01-01")


def test_last_before_first_raises():
    with pytest.raises(ValueError):
        DateRange(JAN[5], JAN[1])


def test_repr():
    assert repr(DateRange(JAN[1], JAN[2])) == "DateRange(2024-01-01..2024-01-02)"


def test_contains_both_ends():
    week = DateRange(JAN[1], JAN[7])
    assert JAN[1] in week
    assert JAN[7] in week
    assert JAN[8] not in week


def test_len_counts_both_ends():
    assert len(DateRange(JAN[1], JAN[7])) == 7


def test_iteration_includes_last_day():
    assert list(DateRange(JAN[30], JAN[31])) == [JAN[30], JAN[31]]


def test_single_day_range():
    day = DateRange(JAN[15], JAN[15])
    assert day
    assert list(day) == [JAN[15]]


def test_to_interval_is_half_open():
    assert DateRange(JAN[1], JAN[7]).to_interval() == Interval(JAN[1], JAN[8])


def test_overlapping_ranges_overlap():
    assert DateRange(JAN[1], JAN[10]).overlaps(DateRange(JAN[5], JAN[20]))


def test_distant_ranges_do_not_overlap():
    assert not DateRange(JAN[1], JAN[3]).overlaps(DateRange(JAN[10], JAN[12]))


def test_consecutive_ranges_do_not_overlap():
    assert not DateRange(JAN[1], JAN[3]).overlaps(DateRange(JAN[4], JAN[6]))


def test_ranges_sharing_a_day_overlap():
    assert DateRange(JAN[1], JAN[3]).overlaps(DateRange(JAN[3], JAN[6]))
