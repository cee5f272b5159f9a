"""The audit bundle: an export that keeps the store's content addressing (each message once,
records referring to it by digest), written and read back as a stream (`curator audit
export --format bundle`, `curator audit import`)."""
