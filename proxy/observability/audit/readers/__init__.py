"""proxy.observability.audit.readers."""
