"""Test doubles that talk real HTTP: a strict fake OpenAI server and a uvicorn runner."""
