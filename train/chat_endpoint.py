"""An OpenAI-compatible chat endpoint (vLLM, SGLang, `transformers serve`, a hosted API): `/chat/completions` with
tools, `/models`, retried where the server did nothing lasting (a lost connection, 429, 5xx), and its refusals told
apart (`EndpointRefused`: 4xx). The policy of `groupscore eval --endpoint` (train/endpoint_rollouts.py)."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

RETRIES = 4  # a 429, a 5xx or a lost connection: sent again after 1, 2, 4, 8 s (or the server's Retry-After)
RETRYABLE = {408, 409, 425, 429}  # and every 5xx: the server did nothing lasting, and says to come back
MAX_RETRY_AFTER_S = 30.0


class EndpointError(Exception):
    """The endpoint did not answer (after retries): nothing judged the sample."""


class EndpointRefused(EndpointError):
    """The endpoint refused the request itself (4xx): `status` says which."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class ChatEndpoint:
    """An OpenAI-compatible server's /chat/completions. `url` is its base (…/v1); the key is `api_key`, else
    OPENAI_API_KEY, else none; `model` None: the one model the server lists at /models."""

    url: str
    model: str | None = None
    api_key: str | None = None
    timeout_s: float = 600.0
    backoff_s: float = 1.0
    _http: httpx.Client = field(init=False, repr=False)
    _reached: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(
                f"--endpoint: {self.url!r} is not an http(s) URL; give the server's base, e.g. http://127.0.0.1:8000/v1"
            )
        key = self.api_key if self.api_key is not None else os.environ.get("OPENAI_API_KEY")
        headers = {"authorization": f"Bearer {key}"} if key else {}
        timeout = httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s))
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def served_model(self) -> str:
        """The model to ask for: the one given, else the server's only model (a one-line error when it lists more).
        The first call asks /models either way, so an endpoint that cannot be reached, or refuses the key, says so
        once, before any task runs; a named model the server does not list gets a warning (a router may still serve
        it), and a server without /models is taken at its word."""
        if self._reached and self.model is not None:
            return self.model
        try:
            data = self._request("GET", "/models").get("data")
        except EndpointRefused as exc:
            if exc.status != 404 or self.model is None:
                raise EndpointRefused(
                    f"{exc}{'' if self.model else ' (name the model with --model)'}", exc.status
                ) from None
            data = None
        listed = [m.get("id") for m in data if isinstance(m, dict)] if isinstance(data, list) else []
        names = [name for name in listed if isinstance(name, str)]
        if self.model is None:
            if len(names) != 1:
                shown = ", ".join(names[:10]) or "none"
                raise ValueError(f"--endpoint {self.url} lists {len(names)} models ({shown}): name one with --model")
            self.model = names[0]
        elif names and self.model not in names:
            print(f"groupscore: {self.url} does not list the model {self.model!r} (it lists {', '.join(names[:5])})",
                  file=sys.stderr)  # fmt: skip
        self._reached = True
        return self.model

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float,
        max_tokens: int,
        tools: list[dict[str, Any]] | None = None,
        seed: int | None = None,
    ) -> tuple[dict[str, Any], int]:
        """One reply: (its message, the tokens the server says it generated; 0 when it does not say)."""
        body: dict[str, Any] = {
            "model": self.served_model(),
            "messages": messages,
            "temperature": temperature,
            "max_tokens": max(1, max_tokens),
        }
        if tools:
            body["tools"] = tools
        if seed is not None:
            body["seed"] = seed
        answer = self._request("POST", "/chat/completions", body)
        try:
            message = answer["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise EndpointError(f"{self.url}/chat/completions answered without choices[0].message") from None
        if not isinstance(message, dict):
            raise EndpointError(f"{self.url}/chat/completions answered a message that is not an object")
        usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
        tokens = usage.get("completion_tokens") if usage else 0
        return message, tokens if isinstance(tokens, int) and tokens > 0 else 0

    def _request(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        failure = ""
        for attempt in range(RETRIES + 1):
            try:
                response = self._http.request(method, path, json=body)
            except httpx.TransportError as exc:
                failure, wait = f"{type(exc).__name__}: {exc}", None
            else:
                status = response.status_code
                if status < 400:
                    return _decoded(response, f"{self.url}{path}")
                if status not in RETRYABLE and status < 500:
                    raise EndpointRefused(f"{self.url}{path}: HTTP {status}: {_detail(response)}", status)
                failure, wait = f"HTTP {status}: {_detail(response)}", _retry_after(response)
            if attempt < RETRIES:
                time.sleep(self.backoff_s * 2**attempt if wait is None else wait)
        raise EndpointError(f"{self.url}{path} did not answer after {RETRIES + 1} attempts: {failure}")


def _decoded(response: httpx.Response, where: str) -> dict[str, Any]:
    try:
        decoded = response.json()
    except ValueError:
        raise EndpointError(f"{where}: the answer is not JSON: {response.text[:200]!r}") from None
    if not isinstance(decoded, dict):
        raise EndpointError(f"{where}: the answer is not a JSON object")
    return decoded


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return min(MAX_RETRY_AFTER_S, max(0.0, float(response.headers["retry-after"])))
    except (KeyError, ValueError):
        return None


def _detail(response: httpx.Response) -> str:
    try:
        decoded = response.json()
    except ValueError:
        return " ".join(response.text.split())[:300]
    error = decoded.get("error", decoded.get("detail", decoded)) if isinstance(decoded, dict) else decoded
    if isinstance(error, dict):
        error = error.get("message", error)
    return " ".join(str(error).split())[:300]
