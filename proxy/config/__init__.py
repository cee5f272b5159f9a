"""proxy.config.loader."""
