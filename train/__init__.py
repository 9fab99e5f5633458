"""The bundled GRPO trainer on TRL: SFT cold start, preflight, GRPO through the service, evaluation."""
