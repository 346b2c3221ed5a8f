"""Metrics, models/health, client disconnects, the prefix cache against a cold server, overload
(503) and shutdown."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest

from serving_harness import (MAX_MODEL_LEN, SERVED_NAME, RunningServer, engine_config,
                                    metric, sse_chunks)

USER = [{"role": "user", "content": "Explain the while statement in Python."}]
REQUIRED_NAMES = (
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
    "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
    "vllm:time_to_first_token_seconds_count", "vllm:inter_token_latency_seconds_count",
    "vllm:e2e_request_latency_seconds_count", "vllm:request_success_total",
    "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
)


@pytest.fixture(scope="module")
def cold():
    """A second server without prefix caching and with a one-request queue (same buckets as the
    main one, so its executables come from the compilation cache), without an API key."""
    s = RunningServer(engine_config(enable_prefix_cache=False, max_queue=1), api_key=None)
    yield s
    s.stop()


def wait_until(predicate, timeout: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def delta(after: dict, before: dict, name: str, **labels) -> float:
    return metric(after, name, **labels) - metric(before, name, **labels)


def test_metrics_report_vllm_names_with_exact_counts(server, http):
    server.wait_idle()
    before = server.metrics()
    r = http.post("/v1/chat/completions", json={"model": SERVED_NAME, "messages": USER,
                                                 "max_tokens": 5, "ignore_eos": True})
    usage = r.json()["usage"]
    after = server.metrics()
    assert delta(after, before, "vllm:prompt_tokens_total") == usage["prompt_tokens"]
    assert delta(after, before, "vllm:generation_tokens_total") == 5
    assert delta(after, before, "vllm:request_success_total", finished_reason="length") == 1
    for name in ("time_to_first_token", "e2e_request_latency"):
        assert delta(after, before, f"vllm:{name}_seconds_count") == 1
        assert delta(after, before, f"vllm:{name}_seconds_sum") > 0
    assert 1 <= delta(after, before, "vllm:inter_token_latency_seconds_count") <= 4
    assert metric(after, "vllm:num_requests_running") == 0
    assert metric(after, "vllm:num_requests_waiting") == 0
    assert 0 <= metric(after, "vllm:kv_cache_usage_perc") <= 1
    assert metric(after, "vllm:prefix_cache_queries_total") >= \
        metric(after, "vllm:prefix_cache_hits_total") >= 0
    text = httpx.get(server.url + "/metrics").text
    v1 = http.get("/v1/metrics")
    assert v1.status_code == 200 and v1.headers["content-type"].startswith("text/plain")
    for name in REQUIRED_NAMES:
        assert name in text and name in v1.text
    assert f'model_name="{SERVED_NAME}"' in text


def test_models_and_health(http):
    data = http.get("/v1/models").json()
    assert data["object"] == "list"
    [card] = data["data"]
    assert card["id"] == SERVED_NAME and card["object"] == "model"
    assert card["max_model_len"] == MAX_MODEL_LEN
    assert http.get("/health").status_code == 200


def _stats_while(server, check) -> None:
    wait_until(lambda: check(server.engine.stats()), what="engine state")


def test_streaming_client_disconnect_frees_pages(server):
    server.wait_idle()
    idle_kv = server.engine.stats().kv_usage
    before = server.metrics()
    body = {"model": SERVED_NAME, "messages": USER, "max_tokens": 480, "ignore_eos": True,
            "stream": True}
    with server.client() as c, c.stream("POST", "/v1/chat/completions", json=body) as r:
        lines = r.iter_lines()  # held open: dropping a half-read iterator closes the connection
        events = 0
        while events < 4:
            events += next(lines).startswith("data: ")
        during = server.metrics()
        assert metric(during, "vllm:num_requests_running") == 1
        assert metric(during, "vllm:kv_cache_usage_perc") > idle_kv
    _stats_while(server, lambda s: s.num_running == 0 and s.kv_usage == pytest.approx(idle_kv))
    after = server.metrics()
    assert delta(after, before, "vllm:request_success_total", finished_reason="abort") == 1
    assert delta(after, before, "vllm:generation_tokens_total") < 480


def test_non_streaming_client_disconnect_frees_pages(server):
    server.wait_idle()
    idle_kv = server.engine.stats().kv_usage
    before = server.metrics()
    body = json.dumps({"model": SERVED_NAME, "messages": USER, "max_tokens": 480,
                       "ignore_eos": True}).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
            f"Authorization: Bearer {server.api_key}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(head + body)
    _stats_while(server, lambda s: s.num_running == 1 and s.kv_usage > idle_kv)
    sock.close()
    _stats_while(server, lambda s: s.num_running == 0 and s.kv_usage == pytest.approx(idle_kv))
    after = server.metrics()
    assert delta(after, before, "vllm:request_success_total", finished_reason="abort") == 1
    assert delta(after, before, "vllm:generation_tokens_total") < 480


SYSTEM = ("You are a helpful assistant who answers questions about the Python language "
          "reference: statements, expressions, the data model, and the standard types. " * 3)


def _greedy_chat(s: RunningServer, messages: list[dict]) -> dict:
    with s.client() as c:
        r = c.post("/v1/chat/completions", json={
            "model": SERVED_NAME, "messages": messages, "max_tokens": 16, "temperature": 0,
            "logprobs": True, "return_tokens_as_token_ids": True})
    assert r.status_code == 200, r.text
    return r.json()


def test_second_turn_hits_the_prefix_cache_and_answers_like_a_cold_server(server, cold):
    turn1 = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is a for loop?"}]
    first = _greedy_chat(server, turn1)
    turn2 = turn1 + [{"role": "assistant", "content": first["choices"][0]["message"]["content"]},
                     {"role": "user", "content": "And a while loop?"}]
    before = server.metrics()
    warm = _greedy_chat(server, turn2)
    after = server.metrics()
    hits = delta(after, before, "vllm:prefix_cache_hits_total")
    assert hits >= 16  # at least one full page of the shared system + first turn
    assert delta(after, before, "vllm:prefix_cache_queries_total") >= hits
    assert warm["usage"]["prompt_tokens_details"]["cached_tokens"] == hits

    cold_answer = _greedy_chat(cold, turn2)
    assert cold_answer["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert cold_answer["usage"]["prompt_tokens"] == warm["usage"]["prompt_tokens"]
    warm_lp = warm["choices"][0]["logprobs"]["content"]
    cold_lp = cold_answer["choices"][0]["logprobs"]["content"]
    assert [e["token"] for e in warm_lp] == [e["token"] for e in cold_lp]
    assert warm["choices"][0]["message"] == cold_answer["choices"][0]["message"]
    assert [e["logprob"] for e in warm_lp] == pytest.approx([e["logprob"] for e in cold_lp],
                                                            abs=1e-4)


def test_full_queue_answers_503_and_recovers(cold):
    results: list[httpx.Response] = []
    lock = threading.Lock()

    def one() -> None:
        with cold.client() as c:
            r = c.post("/v1/chat/completions", json={"model": SERVED_NAME, "messages": USER,
                                                     "max_tokens": 200, "ignore_eos": True})
        with lock:
            results.append(r)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = sorted(r.status_code for r in results)
    assert codes.count(200) >= 1 and codes.count(503) >= 2, codes
    assert set(codes) <= {200, 503}
    for r in results:
        if r.status_code == 503:
            err = r.json()["error"]
            assert err["code"] == "overloaded" and err["type"] == "service_unavailable_error"
        else:
            assert r.json()["usage"]["completion_tokens"] == 200
    cold.wait_idle()
    with cold.client() as c:
        assert c.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2}).status_code == 200


def test_shutdown_refuses_new_requests_then_stops_the_engine(cold):
    """Last test using `cold`: it shuts that server down the way SIGTERM does."""
    stream_result: dict = {}

    def long_stream() -> None:
        with cold.client() as c:
            r = c.post("/v1/completions", json={"prompt": "The", "max_tokens": 300,
                                                "ignore_eos": True, "stream": True})
            stream_result["chunks"] = sse_chunks(r)

    t = threading.Thread(target=long_stream)
    t.start()
    wait_until(lambda: cold.engine.stats().num_running == 1, what="the stream to start")
    cold.dgjax.begin_shutdown()  # what the SIGTERM handler of `python -m dgjax.serve` calls
    with cold.client() as c:
        r = c.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2})
        assert r.status_code == 503 and r.json()["error"]["code"] == "shutting_down"
        assert c.get("/health").status_code == 503
    engine_threads = _engine_threads()
    cold.stop()
    t.join(timeout=30)
    last = stream_result["chunks"][-1]["choices"][0]
    assert last["finish_reason"] in ("length", "abort")
    assert _engine_threads() == engine_threads - 1  # lifespan shutdown stopped the engine loop


def _engine_threads() -> int:
    return sum(t.name == "dgjax-engine" and t.is_alive() for t in threading.enumerate())
