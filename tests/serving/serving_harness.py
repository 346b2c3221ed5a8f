"""A real server for tests: the real Engine on checkpoints/tiny-chat behind uvicorn on a free port,
in a background thread, talked to over real HTTP; plus small helpers the test modules share."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import uvicorn
from prometheus_client.parser import text_string_to_metric_families

from dgjax.config import EngineConfig
from dgjax.runtime.engine import Engine
from dgjax.paths import default_model_dir
from dgjax.serving.app import DgjaxServer

MODEL_DIR = default_model_dir()
API_KEY = "test-key"
SERVED_NAME = "dgjax-test"
MAX_MODEL_LEN = 512
MAX_BODY_BYTES = 100_000


def engine_config(**overrides) -> EngineConfig:
    """One decode width (4): a row's float32 arithmetic then does not depend on how many requests
    share a tick (XLA's CPU dot sums differently at 1 row than at 4), so tests may compare a request
    sent alone with the same request batched (or a warm server with a cold one) token for token."""
    base = dict(dtype="float32", max_model_len=MAX_MODEL_LEN, max_concurrency=4, page_size=16,
                num_pages=160, decode_buckets=(4,), prefill_buckets=(64, 256),
                aot_structured_variants=False)  # CI time: the split tick compiles on first constrained use
    base.update(overrides)
    return EngineConfig(**base)


class RunningServer:
    """One engine + app + uvicorn on 127.0.0.1:<free port>, in a daemon thread."""

    def __init__(self, config: EngineConfig, *, api_key: str | None = None,
                 served_model_name: str = SERVED_NAME, max_body_bytes: int = MAX_BODY_BYTES,
                 graceful_timeout: float = 5.0, model_dir: str = MODEL_DIR, options=None,
                 wrap_app=None) -> None:
        """`options`: a dgjax.serving.options.ServingOptions; `wrap_app`: an ASGI middleware
        factory put around the app (tests that record what went over the wire)."""
        self.engine = Engine(model_dir, config)
        self.engine.start()
        self.api_key = api_key
        self.served_model_name = served_model_name
        self.dgjax = DgjaxServer(self.engine, served_model_name=served_model_name,
                                 model_dir=model_dir, api_key=api_key,
                                 max_body_bytes=max_body_bytes, options=options)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        app = self.dgjax.build()
        uv_config = uvicorn.Config(wrap_app(app) if wrap_app else app, log_level="warning",
                                   timeout_graceful_shutdown=graceful_timeout)
        self.uvicorn = uvicorn.Server(uv_config)
        self.thread = threading.Thread(target=self.uvicorn.run, kwargs={"sockets": [sock]},
                                       daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.uvicorn.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def client(self, **kwargs) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers, timeout=120, **kwargs)

    def openai(self):
        import openai

        return openai.OpenAI(base_url=self.url + "/v1", api_key=self.api_key or "none",
                             max_retries=0, timeout=120)

    def metrics(self) -> dict[tuple[str, tuple], float]:
        """Every sample of /metrics as {(name, sorted labels without model_name): value}."""
        text = httpx.get(self.url + "/metrics", timeout=30).text
        out = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "model_name"))
                out[(s.name, labels)] = s.value
        return out

    def wait_idle(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.engine.stats().num_running or self.engine.stats().num_waiting:
            if time.monotonic() > deadline:
                raise AssertionError(f"engine still busy: {self.engine.stats()}")
            time.sleep(0.02)

    def stop(self) -> None:
        if self.thread.is_alive():
            self.uvicorn.should_exit = True
            self.thread.join(timeout=60)


def metric(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def hf_chat_ids(hf_tokenizer, messages, **kwargs) -> list[int]:
    ids = hf_tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                           **kwargs)
    if not isinstance(ids, list):  # transformers 5 returns a BatchEncoding by default
        ids = ids["input_ids"]
    return list(ids)


def sse_chunks(response: httpx.Response) -> list:
    """Parse an SSE body into JSON objects; asserts it ends with [DONE]."""
    import json

    events = [line[len("data: "):] for line in response.text.split("\n") if line.startswith("data: ")]
    assert events and events[-1] == "[DONE]", response.text[-300:]
    return [json.loads(e) for e in events[:-1]]


def special_token_texts(hf_tokenizer) -> set[str]:
    """Texts of the added special tokens, which `skip_special_tokens` drops from output text."""
    return {t.content for t in hf_tokenizer.added_tokens_decoder.values() if t.special}
