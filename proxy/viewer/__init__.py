"""The audit web viewer: what the model saw, and what the proxy changed, in a browser.

Server-rendered HTML over any audit store `Reader` (`proxy.observability.audit.readers.
query`), with a little JavaScript and CSS from `static/`, no build step and no external
fetch. `Viewer.handle` turns one GET (or the login POST) into one reply; the admin listener
(`proxy.serving.admin`), `curator audit serve` and, when configured, the client port
(`asgi.py`) all serve it. Every dynamic string is escaped by markupsafe.
"""
