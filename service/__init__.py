"""The batched HTTP scoring service: the FastAPI app (app.py) with its own endpoints and the peer protocols' (OpenRLHF's
/get_reward, SandboxFusion's /run_code: protocols.py), the Gatekeeper middleware (auth, body limit, request metrics),
admission and scoring through the runtime (dispatch.py), settings (settings.py: every GROUPSCORE_* variable the
service reads) and metrics. Its clients and the trainer adapters are groupscore.client."""
