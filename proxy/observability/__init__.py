"""What the proxy reports: one exchange record per request (`exchange`), read by the
metrics (`metrics/`) and the audit log (`audit/`) through `observers`."""
