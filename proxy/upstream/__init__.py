"""The upstream side: one small client interface (`client`), two clients that each map their
own failures (`h1_client` in production, httpx in tests and for URLs with credentials;
`connect` opens one), URL and header hygiene, and the relay that streams back."""
