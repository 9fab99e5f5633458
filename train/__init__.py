"""The bundled GRPO trainer on TRL: SFT cold start, preflight, GRPO through the service, evaluation.

The Hugging Face offline variables are the user's to set (make, the tests and the demo set them), never the trainer's.
"""
