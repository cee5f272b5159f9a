"""context-curator's pure curation core: messages, tokens, curators, chains, policies.

Nothing here imports the HTTP stack; the only I/O goes through callables it is handed.
"""
