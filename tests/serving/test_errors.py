"""Every bad input gets OpenAI's error JSON with the right status and `param`, and the server keeps
serving normal requests afterwards."""

from __future__ import annotations

import threading

import httpx
import openai
import pytest

from serving_harness import MAX_BODY_BYTES, SERVED_NAME, sse_chunks

USER = [{"role": "user", "content": "Hello there"}]
LONG_TEXT = "word " * 700  # well over the 512-token context


def assert_error(r: httpx.Response, status: int, param: str | None) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    assert err["param"] == param, err
    return err


def assert_still_serving(http) -> None:
    r = http.post("/v1/chat/completions", json={"model": SERVED_NAME, "messages": USER,
                                                 "max_tokens": 2})
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] >= 1


CHAT_CASES = [
    ({"messages": None}, "messages"),
    ({"messages": "hi"}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"content": "x"}]}, "messages[0].role"),
    ({"messages": ["hi"]}, "messages[0]"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"messages": [{"role": "user"}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "messages[0].content[0]"),
    ({"messages": USER + [{"role": "system", "content": "late"}]}, "messages"),  # template raises
    ({"temperature": "hot"}, "temperature"),
    ({"temperature": 2.5}, "temperature"),
    ({"temperature": -0.1}, "temperature"),
    ({"top_p": 0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"top_k": -2}, "top_k"),
    ({"min_p": 2}, "min_p"),
    ({"repetition_penalty": 0}, "repetition_penalty"),
    ({"presence_penalty": 3}, "presence_penalty"),
    ({"frequency_penalty": -3}, "frequency_penalty"),
    ({"n": 0}, "n"),
    ({"n": 1000}, "n"),
    ({"n": "2"}, "n"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": "5"}, "max_tokens"),
    ({"max_tokens": 1.5}, "max_tokens"),
    ({"max_tokens": True}, "max_tokens"),
    ({"max_completion_tokens": -1}, "max_completion_tokens"),
    ({"logprobs": "yes"}, "logprobs"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
    ({"top_logprobs": 2}, "top_logprobs"),
    ({"stop": 5}, "stop"),
    ({"stop": ["a", 1]}, "stop"),
    ({"stop_token_ids": [99999]}, "stop_token_ids"),
    ({"logit_bias": {"abc": 1}}, "logit_bias"),
    ({"logit_bias": {"99999": 1}}, "logit_bias"),
    ({"logit_bias": {"-1": 1}}, "logit_bias"),
    ({"logit_bias": {"5": 500}}, "logit_bias"),
    ({"logit_bias": [1]}, "logit_bias"),
    ({"seed": "x"}, "seed"),
    ({"stream": "yes"}, "stream"),
    ({"stream_options": {"include_usage": True}}, "stream_options"),
    ({"stream": True, "stream_options": {"include_usage": "x"}}, "stream_options.include_usage"),
    ({"ignore_eos": "x"}, "ignore_eos"),
    ({"chat_template_kwargs": "x"}, "chat_template_kwargs"),
    ({"chat_template_kwargs": {"tools": []}}, "chat_template_kwargs"),
    ({"tools": "x"}, "tools"),
    ({"tools": [{"type": "function"}]}, "tools[0]"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "sometimes"},
     "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}],
      "tool_choice": {"type": "function", "function": {"name": "g"}}}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}], "parallel_tool_calls": "no"},
     "parallel_tool_calls"),
    ({"response_format": {"type": "yaml"}}, "response_format"),
    ({"model": 5}, "model"),
    ({"messages": [{"role": "user", "content": LONG_TEXT}]}, "messages"),
    ({"max_tokens": 500}, "max_tokens"),
]


@pytest.mark.parametrize("fields,param", CHAT_CASES, ids=[f"{p}-{i}" for i, (_, p) in
                                                          enumerate(CHAT_CASES)])
def test_bad_chat_request_is_a_400_naming_the_field(http, fields, param):
    body = {"model": SERVED_NAME, "messages": USER, **fields}
    body = {k: v for k, v in body.items() if v is not None}
    err = assert_error(http.post("/v1/chat/completions", json=body), 400, param)
    assert err["type"] == "invalid_request_error"
    assert_still_serving(http)


COMPLETION_CASES = [
    ({}, "prompt"),
    ({"prompt": 5}, "prompt"),
    ({"prompt": []}, "prompt"),
    ({"prompt": [[]]}, "prompt"),
    ({"prompt": [[1, 2], "a"]}, "prompt"),
    ({"prompt": [1, "a"]}, "prompt"),
    ({"prompt": [99999]}, "prompt"),
    ({"prompt": [[1], [-1]]}, "prompt"),
    ({"prompt": ""}, "prompt"),
    ({"prompt": LONG_TEXT}, "prompt"),
    ({"prompt": list(range(1, 600))}, "prompt"),
    ({"prompt": "hi", "max_tokens": 512}, "max_tokens"),
    ({"prompt": "hi", "logprobs": 21}, "logprobs"),
    ({"prompt": "hi", "logprobs": True}, "logprobs"),
    ({"prompt": "hi", "echo": "x"}, "echo"),
    ({"prompt": "hi", "suffix": "x"}, "suffix"),
    ({"prompt": "hi", "best_of": 3}, "best_of"),
    ({"prompt": "hi", "temperature": 9}, "temperature"),
    ({"prompt": "hi", "cache_salt": ""}, "cache_salt"),
    ({"prompt": "hi", "cache_salt": 7}, "cache_salt"),
]


@pytest.mark.parametrize("fields,param", COMPLETION_CASES,
                         ids=[f"{p}-{i}" for i, (_, p) in enumerate(COMPLETION_CASES)])
def test_bad_completion_request_is_a_400_naming_the_field(http, fields, param):
    r = http.post("/v1/completions", json={"model": SERVED_NAME, **fields})
    assert_error(r, 400, param)
    assert_still_serving(http)


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"", b"\xff\xfe", b'"text"',
                                 b'{"seed": ' + b"9" * 5000 + b"}", b"[" * 40_000 + b"]" * 40_000],
                         ids=["syntax", "array", "empty", "not-utf8", "string", "huge-int", "deep"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_body_that_is_not_a_json_object_is_a_400(http, path, raw):
    r = http.post(path, content=raw, headers={"content-type": "application/json"})
    assert_error(r, 400, None)
    assert_still_serving(http)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_unknown_model_is_a_404(http, path):
    r = http.post(path, json={"model": "gpt-4", "messages": USER, "prompt": "hi"})
    err = assert_error(r, 404, "model")
    assert err["code"] == "model_not_found"


def test_unknown_route_and_wrong_method_get_json_errors(http):
    assert_error(http.get("/v1/nothing-here"), 404, None)
    assert_error(http.get("/v1/chat/completions"), 405, None)


def test_body_over_the_limit_is_a_413(http):
    big = {"model": SERVED_NAME, "messages": [{"role": "user", "content": "x" * MAX_BODY_BYTES}]}
    err = assert_error(http.post("/v1/chat/completions", json=big), 413, None)
    assert err["code"] == "request_too_large"

    def chunked():  # no Content-Length: the limit must hold on the bytes actually read
        yield b'{"model": "' + SERVED_NAME.encode() + b'", "prompt": "'
        for _ in range(MAX_BODY_BYTES // 10_000 + 1):
            yield b"y" * 10_000
        yield b'"}'

    r = http.post("/v1/completions", content=chunked(), headers={"content-type": "application/json"})
    assert "content-length" not in r.request.headers
    assert_error(r, 413, None)
    # just under the limit is read and judged on its content (here: too long for the context)
    ok = {"model": SERVED_NAME, "prompt": "z " * (MAX_BODY_BYTES // 4)}
    assert_error(http.post("/v1/completions", json=ok), 400, "prompt")
    assert_still_serving(http)


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"},
                                     {"Authorization": "Basic dGVzdC1rZXk="},
                                     {"Authorization": "test-key"}])
@pytest.mark.parametrize("method,path", [("POST", "/v1/chat/completions"),
                                         ("POST", "/v1/completions"), ("GET", "/v1/models"),
                                         ("GET", "/v1/metrics")])
def test_v1_requires_the_api_key(server, headers, method, path):
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as c:
        r = c.request(method, path, json={"model": SERVED_NAME, "messages": USER, "prompt": "hi"})
    err = assert_error(r, 401, None)
    assert err["code"] == "invalid_api_key"
    assert r.headers["www-authenticate"] == "Bearer"


def test_health_and_metrics_need_no_key(server):
    assert httpx.get(server.url + "/health").status_code == 200
    assert httpx.get(server.url + "/metrics").status_code == 200


def test_openai_sdk_sees_typed_errors(server):
    client = server.openai()
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=SERVED_NAME, messages=USER, temperature=5)
    assert e.value.param == "temperature"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=USER)
    bad = openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()


def test_bad_requests_do_not_disturb_a_running_one(server, http):
    good = {"model": SERVED_NAME, "messages": USER, "max_tokens": 120, "ignore_eos": True,
            "temperature": 0}
    reference = http.post("/v1/chat/completions", json=good).json()["choices"][0]["message"]
    result: dict = {}

    def run_good() -> None:
        with server.client() as c:
            result["response"] = c.post("/v1/chat/completions", json={**good, "stream": True})

    t = threading.Thread(target=run_good)
    t.start()
    for fields, param in CHAT_CASES:
        body = {k: v for k, v in {"model": SERVED_NAME, "messages": USER, **fields}.items()
                if v is not None}
        assert http.post("/v1/chat/completions", json=body).status_code == 400
    t.join()
    text = "".join(c["choices"][0]["delta"].get("content") or ""
                   for c in sse_chunks(result["response"]) if c["choices"])
    assert text == reference["content"]
