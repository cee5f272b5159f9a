"""Audit store readers, for `curator audit` and `curator simulate`."""
