"""The length verifier: a target range in characters or whitespace tokens, with a linear penalty outside it."""
