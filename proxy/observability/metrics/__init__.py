"""Prometheus metrics: the families (`families`), their lock-free event-loop versions
(`loop`), bounded label values (`labels`) and multi-worker mode (`multiproc`)."""
