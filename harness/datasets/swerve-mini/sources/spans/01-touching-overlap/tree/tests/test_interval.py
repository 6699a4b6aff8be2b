import datetime as dt

import pytest

from spans import Interval, merge


class TestConstruction:
    def test_end_before_start_raises(self):
        with pytest.raises(ValueError):
            Interval(5, 1)

    def test_empty_interval(self):
        assert Interval(3, 3).is_empty()
        assert not Interval(3, 4).is_empty()

    def test_length(self):
        assert Interval(2, 7).length == 5

    def test_repr(self):
        assert repr(Interval(1, 2)) == "Interval(1, 2)"

    def test_equality_and_hash(self):
        assert Interval(1, 2) == Interval(1, 2)
        assert len({Interval(1, 2), Interval(1, 2), Interval(1, 3)}) == 2


class TestContains:
    def test_start_is_included(self):
        assert 1 in Interval(1, 5)

    def test_end_is_excluded(self):
        assert 5 not in Interval(1, 5)

    def test_works_with_dates(self):
        week = Interval(dt.date(2024, 1, 1), dt.date(2024, 1, 8))
        assert dt.date(2024, 1, 7) in week


class TestOverlaps:
    def test_overlapping(self):
        assert Interval(1, 5).overlaps(Interval(4, 8))

    def test_disjoint(self):
        assert not Interval(1, 2).overlaps(Interval(5, 8))

    def test_touching_intervals_do_not_overlap(self):
        assert not Interval(1, 3).overlaps(Interval(3, 5))
        assert not Interval(3, 5).overlaps(Interval(1, 3))

    def test_contained(self):
        assert Interval(1, 10).overlaps(Interval(3, 4))
        assert Interval(3, 4).overlaps(Interval(1, 10))


class TestIntersection:
    def test_overlapping_part(self):
        assert Interval(1, 5).intersection(Interval(3, 8)) == Interval(3, 5)

    def test_contained(self):
        assert Interval(1, 10).intersection(Interval(3, 4)) == Interval(3, 4)


class TestMerge:
    def test_empty_list(self):
        assert merge([]) == []

    def test_overlapping_intervals_merge(self):
        assert merge([Interval(1, 4), Interval(3, 6)]) == [Interval(1, 6)]

    def test_touching_intervals_merge(self):
        assert merge([Interval(1, 3), Interval(3, 5)]) == [Interval(1, 5)]

    def test_disjoint_intervals_stay_apart(self):
        assert merge([Interval(1, 2), Interval(4, 5)]) == [Interval(1, 2), Interval(4, 5)]

    def test_does_not_mutate_input(self):
        intervals = [Interval(4, 5), Interval(1, 2)]
        merge(intervals)
        assert intervals == [Interval(4, 5), Interval(1, 2)]
