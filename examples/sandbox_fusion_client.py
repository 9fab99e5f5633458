"""SandboxFusion's own client (`pip install sandbox-fusion`) against the service's SandboxFusion endpoints."""

from sandbox_fusion import RunCodeRequest, RunStatus, run_code, set_endpoint

set_endpoint("http://127.0.0.1:8000")

ok = run_code(RunCodeRequest(code="print(input()[::-1])", stdin="groupscore", language="python"))
print(ok.status, ok.run_result.stdout.strip())  # RunStatus.Success erocspuorg

# A language the service does not run: SandboxFusion's "not supported" answer, Failed with exit 127, not retried.
lean = run_code(RunCodeRequest(code="#eval 1 + 1", language="lean"), max_attempts=5)
print(lean.status, lean.run_result.return_code, lean.run_result.stderr.strip())
assert ok.status == RunStatus.Success and lean.status == RunStatus.Failed
