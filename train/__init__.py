"""The bundled GRPO trainer on TRL: SFT cold start, preflight, GRPO through the service, evaluation."""

import os as _os

# Offline first, before anything imports huggingface_hub (it reads these once, at import): models come from local
# folders or the local cache, and TRL/transformers make no telemetry look-ups.
for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
    _os.environ.setdefault(_var, "1")
