"""context-curator's HTTP edge: config, routing, forwarding, curation hook, CLI."""
