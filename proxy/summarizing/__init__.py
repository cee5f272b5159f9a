"""proxy.summarizing."""
