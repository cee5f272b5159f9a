"""End-to-end tests over real sockets (uvicorn on loopback, the official openai SDK)."""
