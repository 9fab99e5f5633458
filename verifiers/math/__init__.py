"""The math verifier: extraction (parser), normalisation, and a cheapest-first equivalence cascade (grader)."""
