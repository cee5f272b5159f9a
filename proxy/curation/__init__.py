"""Curation at the edge: a request body in, the body to send upstream and what the policy did
out. Fail-open is decided here, in one place."""
