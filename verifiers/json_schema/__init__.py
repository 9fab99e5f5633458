"""The JSON verifier: parse the completion (or its fenced json block) and validate it against a JSON schema."""
