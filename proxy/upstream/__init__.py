"""proxy.upstream.client."""
