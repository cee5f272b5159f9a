"""The upstream side: one small client interface (`client`), two clients that each map their
own library's errors (aiohttp in production, httpx in tests and for bytes aiohttp cannot send;
`connect` opens one), URL and header hygiene, and the relay that streams back."""
