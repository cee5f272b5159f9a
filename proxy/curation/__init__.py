"""proxy.curation."""
