"""Generation length defaults (no max_tokens: to EOS or the context limit; max_completion_tokens
wins over max_tokens) and SSE keep-alive comments while a stream waits for its first token.

The agent server has one decode slot, so a request sent while another decodes waits in the queue:
that wait is what keep-alives must cover."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest

from agent_server import AGENT_NAME, KEEPALIVE_S, MAX_MODEL_LEN
from dgjax.serving.options import ServingOptions, add_serving_args, serving_options_from_args
from dgjax.serving.reasoning_effort import UnsupportedEffort
from dgjax.serving.sse import SSE_KEEPALIVE, EventStreamResponse
from serving_harness import metric, sse_chunks

HI = [{"role": "user", "content": "hi"}]


def chat(http, **body) -> dict:
    r = http.post("/v1/chat/completions", json={"model": AGENT_NAME, "messages": HI, **body})
    assert r.status_code == 200, r.text
    return r.json()


def long_prompt(http, room: int) -> list[dict]:
    """A conversation whose prompt leaves about `room` tokens of context."""
    words = 1
    while True:
        messages = [{"role": "user", "content": "go " * words}]
        r = http.post("/v1/chat/completions", json={"messages": messages, "max_tokens": 1})
        used = r.json()["usage"]["prompt_tokens"]
        if used >= MAX_MODEL_LEN - room:
            return messages
        words = max(words + 1, words * (MAX_MODEL_LEN - room) // used)


@pytest.mark.parametrize("stream", [False, True], ids=["full", "stream"])
def test_no_max_tokens_generates_to_the_context_limit(agent_http, stream):
    messages = long_prompt(agent_http, room=40)
    body = {"model": AGENT_NAME, "messages": messages, "ignore_eos": True,
            "temperature": 0.0}
    if stream:
        r = agent_http.post("/v1/chat/completions", json={
            **body, "stream": True, "stream_options": {"include_usage": True}})
        chunks = sse_chunks(r)
        usage = chunks[-1]["usage"]
        finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1]
    else:
        out = chat(agent_http, **body)
        usage, finish = out["usage"], out["choices"][0]["finish_reason"]
    assert finish == "length"
    assert usage["total_tokens"] == MAX_MODEL_LEN
    assert usage["completion_tokens"] == MAX_MODEL_LEN - usage["prompt_tokens"] > 16


@pytest.mark.parametrize("fields,expected", [
    ({"max_completion_tokens": 3}, 3),
    ({"max_tokens": 5}, 5),
    ({"max_completion_tokens": 4, "max_tokens": 9}, 4),  # the newer field wins
    ({"max_completion_tokens": None, "max_tokens": 6}, 6),  # null means not given
])
def test_max_completion_tokens_and_max_tokens(agent_http, fields, expected):
    out = chat(agent_http, ignore_eos=True, **fields)
    assert out["usage"]["completion_tokens"] == expected
    assert out["choices"][0]["finish_reason"] == "length"


def test_max_completion_tokens_beyond_the_context_is_a_400(agent_http):
    r = agent_http.post("/v1/chat/completions", json={"messages": HI,
                                                      "max_completion_tokens": MAX_MODEL_LEN})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "context_length_exceeded"


# ---- keep-alive ----

def occupy_the_only_slot(server, tokens: int) -> threading.Thread:
    """Start a long request in the background; returns once the engine is decoding it."""
    def run():
        with server.client() as c:
            c.post("/v1/chat/completions", json={"messages": HI, "max_tokens": tokens,
                                                 "ignore_eos": True})

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while server.engine.stats().num_running == 0:
        assert time.monotonic() < deadline, "the blocking request never started"
        time.sleep(0.01)
    return thread


def read_stream(response: httpx.Response) -> list[tuple[float, str]]:
    """(arrival time, line) for every non-empty line of an SSE response."""
    return [(time.monotonic(), line) for line in response.iter_lines() if line]


@pytest.mark.parametrize("path,body", [
    ("/v1/chat/completions", {"messages": HI}),
    ("/v1/completions", {"prompt": "Once upon a time"}),
], ids=["chat", "completions"])
def test_queued_stream_sends_keepalive_comments(agent_server, path, body):
    blocker = occupy_the_only_slot(agent_server, tokens=500)
    start = time.monotonic()
    with agent_server.client() as c, c.stream("POST", path, json={
            **body, "model": AGENT_NAME, "stream": True, "max_tokens": 4,
            "ignore_eos": True}) as r:
        assert r.status_code == 200
        lines = read_stream(r)
    blocker.join(timeout=60)
    assert lines[-1][1] == "data: [DONE]"
    events = [(t, json.loads(line[len("data: "):])) for t, line in lines[:-1]
              if line.startswith("data: ")]
    first_token = next(t for t, e in events if any(
        (ch.get("delta") or {}).get("content") or ch.get("text") for ch in e["choices"]))
    comments = [t for t, line in lines if line == ": keep-alive" and t < first_token]
    assert len(comments) + len(events) + 1 == len(lines)  # nothing else on the wire
    waited = first_token - start
    assert waited > 3 * KEEPALIVE_S, f"the request did not wait ({waited:.2f} s)"
    assert len(comments) >= int(waited / KEEPALIVE_S) - 2
    gaps = [b - a for a, b in zip(comments, comments[1:])]
    assert all(g > 0.5 * KEEPALIVE_S for g in gaps), gaps  # paced, not a flood


def test_openai_sdk_ignores_keepalives(agent_server):
    reference = agent_server.openai().chat.completions.create(
        model=AGENT_NAME, messages=HI, max_tokens=6, temperature=0.0,
        extra_body={"ignore_eos": True})
    blocker = occupy_the_only_slot(agent_server, tokens=300)
    stream = agent_server.openai().chat.completions.create(
        model=AGENT_NAME, messages=HI, max_tokens=6, temperature=0.0, stream=True,
        extra_body={"ignore_eos": True})
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    blocker.join(timeout=60)
    assert text == reference.choices[0].message.content


def test_client_leaving_during_keepalives_aborts_the_queued_request(agent_server):
    before = agent_server.metrics()
    blocker = occupy_the_only_slot(agent_server, tokens=400)
    with agent_server.client() as c, c.stream("POST", "/v1/chat/completions", json={
            "messages": HI, "stream": True, "max_tokens": 50}) as r:
        for line in r.iter_lines():
            if line == ": keep-alive":
                break  # leave while still queued
    blocker.join(timeout=60)
    agent_server.wait_idle()
    after = agent_server.metrics()
    aborted = "vllm:request_success_total"
    assert metric(after, aborted, finished_reason="abort") == (
        metric(before, aborted, finished_reason="abort") + 1)
    generated = "vllm:generation_tokens_total"
    assert metric(after, generated) - metric(before, generated) == 400  # the blocker's only


def drive(response: EventStreamResponse, disconnect_after: float | None = None) -> list:
    """Run an ASGI response against an in-memory connection; the body messages it sent."""
    async def run():
        gone = asyncio.Event()
        if disconnect_after is not None:
            asyncio.get_running_loop().call_later(disconnect_after, gone.set)

        async def receive():
            await gone.wait()
            return {"type": "http.disconnect"}

        sent = []

        async def send(message):
            if message["type"] == "http.response.body":
                sent.append(message)

        await response(None, receive, send)
        return sent

    return asyncio.run(run())


def test_keepalives_fill_silences_only():
    async def events():
        yield b"a"
        await asyncio.sleep(0.35)
        yield b"b"
        yield b"c"

    bodies = [m["body"] for m in drive(EventStreamResponse(events(), keepalive_s=0.1))]
    assert bodies[0] == b"a" and bodies[-3:] == [b"b", b"c", b""]
    assert 2 <= len(bodies) - 4 <= 4  # ~3 comments in 0.35 s of silence, none elsewhere
    assert set(bodies[1:-3]) == {SSE_KEEPALIVE}
    silent = [m["body"] for m in drive(EventStreamResponse(events(), keepalive_s=0))]
    assert silent == [b"a", b"b", b"c", b""]


def test_disconnect_during_keepalives_stops_the_producer_and_the_ticker():
    cleaned = []

    async def events():
        try:
            yield b"a"
            await asyncio.sleep(30)
        finally:
            cleaned.append(True)

    sent = drive(EventStreamResponse(events(), keepalive_s=0.05), disconnect_after=0.3)
    assert cleaned == [True]
    assert [m["body"] for m in sent][0] == b"a"
    assert 3 <= len(sent) - 1 <= 7  # keep-alives until the client left, then nothing


def test_serving_flags():
    import argparse

    p = argparse.ArgumentParser()
    add_serving_args(p)
    defaults = serving_options_from_args(p.parse_args([]))
    assert defaults == ServingOptions()
    assert defaults.content.max_file_bytes == 10 * 1024 * 1024
    o = serving_options_from_args(p.parse_args([
        "--max-file-bytes", "2MiB", "--max-pdf-pages", "7", "--sse-keepalive", "0",
        "--unsupported-reasoning-effort", "reject"]))
    assert (o.content.max_file_bytes, o.content.max_pdf_pages, o.sse_keepalive_s,
            o.unsupported_reasoning_effort) == (2 * 2**20, 7, 0.0, UnsupportedEffort.REJECT)
