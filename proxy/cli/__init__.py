"""proxy.cli.main."""
