"""proxy.observability.metrics."""
