"""Spend truth: token usage as the upstream reports it, its cost, and what the uncurated
request would have cost (`tap`, `conversation`, `counterfactual`, `observer`)."""
