"""The format verifier: required tags in order with non-empty content, or a user regex matched in linear time."""
