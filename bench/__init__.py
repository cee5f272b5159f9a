"""Reproducible benchmarks for context-curator, and a realistic coding-agent conversation
generator (`bench.conversations`) shared with the end-to-end tests."""
