"""The code verifier: program extraction, test styles, and host-side comparison of sandboxed runs."""
