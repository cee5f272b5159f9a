"""Curation at the edge, for any protocol: a request body in (read by its `WireProtocol`), the
body to send upstream out, and what the policy did noted in the request's record. Fail-open is
decided here, in one place."""
