"""The batched HTTP scoring service, its clients, and adapters for TRL, verl, OpenRLHF and SandboxFusion."""
