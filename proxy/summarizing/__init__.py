"""The summarizer's edge services: the `complete` callable that calls a model through the
proxy's own upstream client, and the summary caches (in memory, or redis for replicas)."""
