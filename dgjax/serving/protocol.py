"""Parse and validate OpenAI request bodies into plain dataclasses.

Every rejection is an `APIError(400)` that names the offending field (`param`), so a client can tell
exactly what to fix. Unknown fields are ignored (vLLM's behaviour); explicit `null` means "not given".
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from dgjax.runtime.executor import MAX_LOGIT_BIAS
from dgjax.runtime.types import MAX_TOP_LOGPROBS, SamplingParams
from dgjax.serving.content import ContentLimits, message_text
from dgjax.serving.errors import bad_request

MAX_N = 128
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")
# Arguments the server itself passes to the chat template; a client may not override them.
RESERVED_TEMPLATE_KWARGS = ("messages", "conversation", "tools", "tokenize", "add_generation_prompt",
                            "continue_final_message", "chat_template", "return_dict", "special_tokens")

_TYPE_NAMES = {str: "a string", bool: "a boolean", int: "an integer", float: "a number",
               list: "an array", dict: "an object"}


class FieldReader:
    """Typed, range-checked access to one JSON object's fields; errors name `prefix + field`."""

    def __init__(self, body: dict[str, Any], prefix: str = "") -> None:
        self.body = body
        self.prefix = prefix

    def param(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def get(self, name: str, kind: type, default: Any = None, *, lo: float | None = None,
            hi: float | None = None, lo_open: bool = False) -> Any:
        value = self.body.get(name)
        if value is None:
            return default
        return check_value(value, kind, self.param(name), lo=lo, hi=hi, lo_open=lo_open)


def check_value(value: Any, kind: type, param: str, *, lo: float | None = None,
                hi: float | None = None, lo_open: bool = False) -> Any:
    """Type check (bools are not numbers; ints are numbers) and optional [lo, hi] range check."""
    ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok, value = True, float(value) if abs(value) < 2**1000 else math.inf
    if not ok:
        raise bad_request(f"'{param}' must be {_TYPE_NAMES[kind]}, got {json.dumps(value)[:80]}.",
                          param, "invalid_type")
    if kind is float and not math.isfinite(value):
        raise bad_request(f"'{param}' must be a finite number.", param, "invalid_value")
    if lo is not None and (value < lo or (lo_open and value == lo)):
        bound = f"greater than {lo}" if lo_open else f"at least {lo}"
        raise bad_request(f"'{param}' must be {bound}, got {value}.", param, "invalid_value")
    if hi is not None and value > hi:
        raise bad_request(f"'{param}' must be at most {hi}, got {value}.", param, "invalid_value")
    return value


@dataclasses.dataclass
class ModelDefaults:
    """Sampling defaults from the model's generation_config.json (None: OpenAI's default)."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    repetition_penalty: float | None = None


@dataclasses.dataclass
class CommonOptions:
    """Fields shared by chat and text completions."""

    model: str | None
    n: int
    stream: bool
    include_usage: bool
    return_tokens_as_token_ids: bool
    params: SamplingParams  # logprobs/prompt_logprobs are filled by the endpoint-specific parser
    cache_salt: str | None = None  # vLLM: prefix-cache sharing only between equal salts


@dataclasses.dataclass
class ChatRequest:
    common: CommonOptions
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    template_kwargs: dict[str, Any]
    add_generation_prompt: bool
    continue_final_message: bool
    logprobs: bool
    top_logprobs: int
    # "auto" | "none" | "required" | {"type": "function", "function": {"name": ...}}
    tool_choice: str | dict[str, Any] = "auto"
    parallel_tool_calls: bool = True


@dataclasses.dataclass
class CompletionRequest:
    common: CommonOptions
    prompts: list[str | list[int]]
    echo: bool
    logprobs: int | None


def parse_json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as e:  # bad UTF-8/JSON, 4300+ digit ints, deep nesting
        raise bad_request(f"Request body is not valid JSON: {e}", None, "invalid_json") from None
    if not isinstance(body, dict):
        raise bad_request("Request body must be a JSON object.", None, "invalid_json")
    return body


def _parse_stop(r: FieldReader) -> list[str]:
    stop = r.body.get("stop")
    if stop is None:
        return []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise bad_request("'stop' must be a string or an array of strings.", "stop", "invalid_type")
    return [s for s in stop if s]


def _parse_token_id_list(r: FieldReader, name: str, vocab_size: int) -> list[int]:
    ids = r.get(name, list, [])
    for i in ids:
        check_value(i, int, name, lo=0, hi=vocab_size - 1)
    return ids


def _parse_logit_bias(r: FieldReader, vocab_size: int) -> dict[int, float]:
    raw = r.get("logit_bias", dict, {})
    if len(raw) > MAX_LOGIT_BIAS:
        raise bad_request(f"'logit_bias' may hold at most {MAX_LOGIT_BIAS} entries.", "logit_bias",
                          "invalid_value")
    out: dict[int, float] = {}
    for key, value in raw.items():
        try:
            token_id = int(key)
        except ValueError:
            raise bad_request(f"'logit_bias' keys must be token ids, got {key!r}.", "logit_bias",
                              "invalid_value") from None
        if not 0 <= token_id < vocab_size:
            raise bad_request(f"'logit_bias' token id {token_id} is outside the vocabulary "
                              f"[0, {vocab_size}).", "logit_bias", "invalid_value")
        out[token_id] = check_value(value, float, "logit_bias", lo=-100.0, hi=100.0)
    return out


def _reject_unsupported(r: FieldReader) -> None:
    """Fields we cannot honour yet: refuse them rather than silently ignore their meaning.
    (`response_format` is checked with the other structured-output fields in serving.structured.)"""
    if r.get("min_tokens", int, 0, lo=0) > 0:
        raise bad_request("'min_tokens' is not supported.", "min_tokens", "unsupported")


def parse_common(body: dict[str, Any], vocab_size: int, defaults: ModelDefaults,
                 max_tokens_fields: tuple[str, ...]) -> CommonOptions:
    r = FieldReader(body)
    _reject_unsupported(r)
    model = r.get("model", str)
    n = r.get("n", int, 1, lo=1, hi=MAX_N)
    stream = r.get("stream", bool, False)
    stream_options = r.get("stream_options", dict)
    include_usage = False
    if stream_options is not None:
        if not stream:
            raise bad_request("'stream_options' is only allowed when 'stream' is true.",
                              "stream_options", "invalid_value")
        include_usage = FieldReader(stream_options, "stream_options.").get(
            "include_usage", bool, False)
    max_tokens = None
    for name in max_tokens_fields:  # the first one given wins (max_completion_tokens first)
        value = r.get(name, int, lo=1)
        if value is not None and max_tokens is None:
            max_tokens = value
    seed = r.get("seed", int, lo=-(2**63), hi=2**63 - 1)
    params = SamplingParams(
        max_tokens=max_tokens,
        temperature=r.get("temperature", float, _or(defaults.temperature, 1.0), lo=0.0, hi=2.0),
        top_p=r.get("top_p", float, _or(defaults.top_p, 1.0), lo=0.0, hi=1.0, lo_open=True),
        top_k=r.get("top_k", int, _or(defaults.top_k, 0), lo=-1),
        min_p=r.get("min_p", float, 0.0, lo=0.0, hi=1.0),
        repetition_penalty=r.get("repetition_penalty", float,
                                 _or(defaults.repetition_penalty, 1.0), lo=0.0, lo_open=True),
        presence_penalty=r.get("presence_penalty", float, 0.0, lo=-2.0, hi=2.0),
        frequency_penalty=r.get("frequency_penalty", float, 0.0, lo=-2.0, hi=2.0),
        logit_bias=_parse_logit_bias(r, vocab_size),
        seed=seed,
        stop=_parse_stop(r),
        stop_token_ids=_parse_token_id_list(r, "stop_token_ids", vocab_size),
        ignore_eos=r.get("ignore_eos", bool, False),
        skip_special_tokens=r.get("skip_special_tokens", bool, True),
        include_stop_str_in_output=r.get("include_stop_str_in_output", bool, False),
    )
    if params.top_k == -1:
        params.top_k = 0
    best_of = r.get("best_of", int, lo=1)
    if best_of is not None and best_of != n:
        raise bad_request("'best_of' different from 'n' is not supported.", "best_of",
                          "unsupported")
    cache_salt = r.get("cache_salt", str)
    if cache_salt is not None and not cache_salt:
        raise bad_request("'cache_salt' must be a non-empty string.", "cache_salt", "invalid_value")
    return CommonOptions(model=model, n=n, stream=stream, include_usage=include_usage,
                         return_tokens_as_token_ids=r.get("return_tokens_as_token_ids", bool, False),
                         params=params, cache_salt=cache_salt)


def _or(value: Any, fallback: Any) -> Any:
    return fallback if value is None else value


def _normalize_tool_calls(calls: Any, param: str) -> list[dict[str, Any]]:
    """Templates expect `arguments` as an object; OpenAI sends a JSON string (vLLM parses it too)."""
    if not isinstance(calls, list):
        raise bad_request(f"'{param}' must be an array.", param, "invalid_type")
    out = []
    for k, call in enumerate(calls):
        if isinstance(call, dict) and call.get("type") == "custom":  # OpenAI custom tool call
            custom = call.get("custom")
            if not isinstance(custom, dict) or not isinstance(custom.get("name"), str) \
                    or not isinstance(custom.get("input", ""), str):
                raise bad_request(f"'{param}[{k}].custom' must be {{'name': str, 'input': str}}.",
                                  f"{param}[{k}].custom", "invalid_type")
            out.append(call)  # rendered as model text (serving.custom_tool_calls)
            continue
        if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
            raise bad_request(f"'{param}[{k}].function' must be an object.",
                              f"{param}[{k}].function", "invalid_type")
        fn = dict(call["function"])
        if not isinstance(fn.get("name"), str):
            raise bad_request(f"'{param}[{k}].function.name' must be a string.",
                              f"{param}[{k}].function.name", "invalid_type")
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                fn["arguments"] = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError:
                pass  # keep the raw string: some templates print it verbatim
        out.append({**call, "function": fn})
    return out


def parse_messages(raw: Any, limits: ContentLimits = ContentLimits()) -> list[dict[str, Any]]:
    """Messages for the chat template; content parts (text, attached files) become plain text."""
    if raw is None:
        raise bad_request("'messages' is required.", "messages", "missing")
    if not isinstance(raw, list):
        raise bad_request("'messages' must be an array.", "messages", "invalid_type")
    if not raw:
        raise bad_request("'messages' must contain at least one message.", "messages", "empty")
    messages = []
    for i, m in enumerate(raw):
        prefix = f"messages[{i}]"
        if not isinstance(m, dict):
            raise bad_request(f"'{prefix}' must be an object.", prefix, "invalid_type")
        r = FieldReader(m, prefix + ".")
        role = r.get("role", str)
        if role is None:
            raise bad_request(f"'{prefix}.role' is required.", f"{prefix}.role", "missing")
        if role not in CHAT_ROLES:
            raise bad_request(f"Unknown role {role!r}; expected one of {', '.join(CHAT_ROLES)}.",
                              f"{prefix}.role", "invalid_value")
        content = m.get("content")
        if content is None and role != "assistant":  # an assistant turn may be only tool calls
            raise bad_request(f"'{prefix}.content' is required for role {role!r}.",
                              f"{prefix}.content", "missing")
        text = "" if content is None else message_text(content, f"{prefix}.content", limits)
        # OpenAI's "developer" role is the system prompt under a newer name; templates know "system"
        msg: dict[str, Any] = {"role": "system" if role == "developer" else role, "content": text}
        for key in ("name", "tool_call_id", "reasoning_content", "reasoning"):
            value = r.get(key, str)
            if value is not None:
                msg[key] = value
        if m.get("tool_calls") is not None:
            msg["tool_calls"] = _normalize_tool_calls(m["tool_calls"], f"{prefix}.tool_calls")
        messages.append(msg)
    return messages


def _parse_tools(r: FieldReader) -> list[dict[str, Any]] | None:
    tools = r.get("tools", list)
    if tools is None:
        return None
    for k, tool in enumerate(tools):
        if isinstance(tool, dict) and tool.get("type") == "custom":
            continue  # OpenAI custom (free-form / grammar) tools: checked in serving.structured
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise bad_request(f"'tools[{k}]' must be {{'type': 'function', 'function': "
                              "{'name': ..., 'parameters': ...}}.", f"tools[{k}]", "invalid_type")
    return tools or None


def _parse_tool_choice(r: FieldReader, tools: list[dict[str, Any]] | None) -> str | dict[str, Any]:
    """"auto" (the default), "none", "required" or {"type": "function", "function": {"name"}}
    naming one of `tools`; the last two need tools."""
    choice = r.body.get("tool_choice")
    if choice is None:
        return "auto"
    if isinstance(choice, dict):
        kind = choice.get("type")  # a function, or an OpenAI custom tool: {"custom": {"name"}}
        fn = choice.get(kind) if kind in ("function", "custom") else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str):
            raise bad_request("'tool_choice' object must be {'type': 'function', 'function': "
                              "{'name': ...}}.", "tool_choice", "invalid_value")
        if name not in {(t.get(kind) or {}).get("name") for t in tools or ()
                        if t.get("type", "function") == kind}:
            raise bad_request(f"'tool_choice' names the function {name!r}, which is not in "
                              "'tools'.", "tool_choice", "invalid_value")
        return choice
    if choice not in ("auto", "none", "required"):
        raise bad_request("'tool_choice' must be 'auto', 'none', 'required' or a named "
                          "function.", "tool_choice", "invalid_value")
    if choice == "required" and not tools:
        raise bad_request("'tool_choice' 'required' needs 'tools'.", "tool_choice",
                          "invalid_value")
    return choice


def parse_chat_request(body: dict[str, Any], vocab_size: int, defaults: ModelDefaults,
                       content_limits: ContentLimits = ContentLimits()) -> ChatRequest:
    messages = parse_messages(body.get("messages"), content_limits)
    common = parse_common(body, vocab_size, defaults, ("max_completion_tokens", "max_tokens"))
    r = FieldReader(body)
    logprobs = r.get("logprobs", bool, False)
    top_logprobs = r.get("top_logprobs", int, lo=0, hi=MAX_TOP_LOGPROBS)
    if top_logprobs is not None and top_logprobs > 0 and not logprobs:
        raise bad_request("'top_logprobs' requires 'logprobs' to be true.", "top_logprobs",
                          "invalid_value")
    top_logprobs = top_logprobs or 0
    common.params.logprobs = top_logprobs if logprobs else None
    kwargs = r.get("chat_template_kwargs", dict, {})
    bad = [k for k in kwargs if k in RESERVED_TEMPLATE_KWARGS]
    if bad:
        raise bad_request(f"'chat_template_kwargs' may not set {bad}.", "chat_template_kwargs",
                          "invalid_value")
    add_generation_prompt = r.get("add_generation_prompt", bool, True)
    continue_final_message = r.get("continue_final_message", bool, False)
    if add_generation_prompt and continue_final_message:
        raise bad_request("'continue_final_message' requires 'add_generation_prompt' false.",
                          "continue_final_message", "invalid_value")
    tools = _parse_tools(r)
    return ChatRequest(common=common, messages=messages, tools=tools,
                       template_kwargs=kwargs, add_generation_prompt=add_generation_prompt,
                       continue_final_message=continue_final_message, logprobs=logprobs,
                       top_logprobs=top_logprobs, tool_choice=_parse_tool_choice(r, tools),
                       parallel_tool_calls=r.get("parallel_tool_calls", bool, True))


def parse_prompts(raw: Any, vocab_size: int) -> list[str | list[int]]:
    """A string, a list of strings, a token-id list, or a list of token-id lists."""
    if raw is None:
        raise bad_request("'prompt' is required.", "prompt", "missing")
    if isinstance(raw, str):
        return [raw]
    if not isinstance(raw, list) or not raw:
        raise bad_request("'prompt' must be a string, an array of strings, an array of token ids "
                          "or an array of token-id arrays, and not empty.", "prompt",
                          "invalid_type")
    if all(isinstance(p, str) for p in raw):
        return list(raw)
    if all(isinstance(p, int) and not isinstance(p, bool) for p in raw):
        raw = [raw]
    prompts: list[str | list[int]] = []
    for k, ids in enumerate(raw):
        if not isinstance(ids, list) or not ids:
            raise bad_request("'prompt' items must all be strings or all non-empty token-id "
                              "arrays.", "prompt", "invalid_type")
        for t in ids:
            if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t < vocab_size:
                raise bad_request(f"'prompt[{k}]' holds {json.dumps(t)[:40]}, not a token id in "
                                  f"[0, {vocab_size}).", "prompt", "invalid_value")
        prompts.append(list(ids))
    return prompts


def parse_completion_request(body: dict[str, Any], vocab_size: int,
                             defaults: ModelDefaults) -> CompletionRequest:
    prompts = parse_prompts(body.get("prompt"), vocab_size)
    common = parse_common(body, vocab_size, defaults, ("max_tokens",))
    r = FieldReader(body)
    if r.get("suffix", str):
        raise bad_request("'suffix' is not supported.", "suffix", "unsupported")
    echo = r.get("echo", bool, False)
    logprobs = r.get("logprobs", int, lo=0, hi=MAX_TOP_LOGPROBS)
    common.params.logprobs = logprobs
    if echo and logprobs is not None:
        common.params.prompt_logprobs = logprobs
    return CompletionRequest(common=common, prompts=prompts, echo=echo, logprobs=logprobs)


def check_context(prompt_len: int, max_tokens: int | None, max_model_len: int,
                  prompt_param: str) -> None:
    """The prompt must leave room for one token; an explicit max_tokens must fit entirely."""
    if prompt_len == 0:
        raise bad_request(f"'{prompt_param}' tokenizes to zero tokens.", prompt_param, "empty")
    if prompt_len >= max_model_len:
        raise bad_request(f"This model's maximum context length is {max_model_len} tokens, but "
                          f"the prompt has {prompt_len} tokens (no room to generate).",
                          prompt_param, "context_length_exceeded")
    if max_tokens is not None and prompt_len + max_tokens > max_model_len:
        raise bad_request(f"This model's maximum context length is {max_model_len} tokens. "
                          f"However, you requested {prompt_len + max_tokens} tokens "
                          f"({prompt_len} in the prompt, {max_tokens} in the completion).",
                          "max_tokens", "context_length_exceeded")
