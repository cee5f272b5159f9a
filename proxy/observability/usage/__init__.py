"""Spend truth: token usage as the upstream reports it, its cost, and what the uncurated
request would have cost (`tap`, `spend`, `conversation`, `counterfactual`), and what the
audit record keeps of them (`audit_fields`)."""
