"""The config file: `loader` reads and validates it whole; each section has its module."""
