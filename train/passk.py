"""pass@k with the unbiased estimator 1 - C(n-c, k) / C(n, k), computed as a stable running product."""

from __future__ import annotations


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of k draws (without replacement) from n samples, c of them correct, is correct."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    # C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k / i): no huge binomials, no cancellation.
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss
