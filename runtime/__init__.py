"""The scoring runtime: raw items in, verdicts out, on bounded worker processes, for the CLI and the service alike."""
