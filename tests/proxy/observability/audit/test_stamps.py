from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from proxy.observability.audit.stamps import FINGERPRINTS_MAX, Stamps, iso_time, key_fingerprint

T0 = 1_767_225_600.0


@given(st.lists(st.floats(min_value=0, max_value=4e9, allow_nan=False), max_size=50))
def test_stamped_times_are_iso_time_exactly(epochs: list[float]) -> None:
    stamps = Stamps()
    for epoch in sorted(epochs) + epochs:  # in order (the memo hits) and out of order
        assert stamps.time(epoch) == iso_time(epoch)


def test_rounding_edges_match_datetime() -> None:
    stamps = Stamps()
    for epoch in (T0 + 0.9995, T0 + 0.9999996, T0 + 0.0005, T0 - 0.0000004, 0.0, T0 + 59.9994):
        assert stamps.time(epoch) == iso_time(epoch)


def test_client_fingerprints_are_remembered_and_bounded() -> None:
    stamps = Stamps()
    keys = [f"Bearer sk-{i:04}" for i in range(FINGERPRINTS_MAX + 10)]
    assert [stamps.client(k) for k in keys] == [key_fingerprint(k) for k in keys]
    assert stamps.client(None) is None
    assert len(stamps._clients) <= FINGERPRINTS_MAX
