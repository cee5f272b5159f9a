"""The disk spool between the audit writer and a remote store (`audit.spool`)."""
