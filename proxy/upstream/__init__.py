"""The upstream side: one small client interface (aiohttp in production, httpx in tests and
for bytes aiohttp cannot send), URL and header hygiene, and the relay that streams back."""
