"""Render HF chat templates (jinja2) exactly the way `transformers.apply_chat_template` does.

Templates come from checkpoints, i.e. untrusted input: they run in jinja2's immutable sandbox with
the same globals and filters transformers gives them, so a template renders byte-identically here
and in transformers. Any failure (syntax error, `raise_exception`, a sandbox violation, a type error
inside the template) surfaces as `ChatTemplateError`, a `ValueError` the server turns into a 400.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

# Names under which a message's reasoning arrives; templates read the first (and gpt-oss `thinking`).
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "


class ChatTemplateError(ValueError):
    """The chat template could not be compiled or rendered for these messages."""


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators=None, sort_keys: bool = False) -> str:
    # jinja's own tojson escapes HTML characters; transformers replaces it with plain json.dumps.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


class _TemplateDict:
    """`dict(...)` for templates without exposing the dict type itself."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """jinja's namespace, refusing underscore attributes (a route to interpreter internals)."""

    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, got {name!r}."
            )


class _GenerationBlock(jinja2.ext.Extension):
    """Accepts transformers' `{% generation %}...{% endgeneration %}` tag and renders its body as-is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


@functools.lru_cache(maxsize=32)
def compile_chat_template(template: str) -> jinja2.Template:
    """Compile once per distinct template text (compiling costs milliseconds; rendering microseconds)."""
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationBlock, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    try:
        return env.from_string(template)
    except jinja2.exceptions.TemplateSyntaxError as e:
        raise ChatTemplateError(f"chat template has a syntax error at line {e.lineno}: {e.message}") from e


def _plain(value: Any) -> Any:
    """Rebuild caller data from plain JSON types, as transformers does before a template sees it."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if callable(getattr(value, "model_dump", None)):
        return _plain(value.model_dump())
    return f"<{type(value).__name__}>"


def normalize_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Messages as transformers hands them to a template.

    Keys whose value is None are dropped (OpenAI clients send `content: null` next to `tool_calls`,
    which many templates would print as "None"), and reasoning given under any of its names is
    also visible as `reasoning_content` and `thinking`.
    """
    out = []
    for message in messages:
        if callable(getattr(message, "model_dump", None)):
            message = message.model_dump()
        if not isinstance(message, Mapping):
            raise ChatTemplateError(f"chat messages must be objects, got {type(message).__name__}")
        message = _plain({k: v for k, v in message.items() if v is not None})
        reasoning = next((message[k] for k in REASONING_FIELDS if message.get(k) is not None), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        out.append(message)
    return out


def render_chat_template(
    template: str,
    messages: Sequence[Any],
    *,
    add_generation_prompt: bool = False,
    tools: Sequence[Mapping[str, Any]] | None = None,
    documents: Sequence[Mapping[str, Any]] | None = None,
    continue_final_message: bool = False,
    special_tokens: Mapping[str, str] | None = None,
    **template_kwargs: Any,
) -> str:
    """Render `template` for one conversation; `template_kwargs` override same-named special tokens.

    `continue_final_message` leaves the last message open (no end-of-turn marker) so the model
    continues it; it excludes `add_generation_prompt`, as in transformers.
    """
    if not messages:
        raise ChatTemplateError("cannot apply a chat template to an empty conversation")
    if continue_final_message and add_generation_prompt:
        raise ChatTemplateError("continue_final_message and add_generation_prompt are mutually exclusive")
    if tools is not None and not all(isinstance(t, Mapping) for t in tools):
        raise ChatTemplateError("tools must be JSON-schema objects")
    compiled = compile_chat_template(template)
    chat = normalize_messages(messages)
    final_content = None
    if continue_final_message:
        final_content = chat[-1].get("content")
        if not isinstance(final_content, str):
            raise ChatTemplateError("continue_final_message needs a final message with string content")
        chat[-1]["content"] = final_content + _CONTINUE_TAG
    variables = {**(special_tokens or {}), **_plain(template_kwargs)}
    try:
        rendered = compiled.render(
            messages=chat,
            tools=_plain(list(tools)) if tools is not None else None,
            documents=_plain(list(documents)) if documents is not None else None,
            add_generation_prompt=add_generation_prompt,
            **variables,
        )
    except jinja2.exceptions.TemplateError as e:
        raise ChatTemplateError(f"chat template error: {e}") from e
    except (TypeError, KeyError, AttributeError, IndexError, ValueError) as e:
        raise ChatTemplateError(f"chat template failed on these messages: {type(e).__name__}: {e}") from e
    if continue_final_message:
        rendered = _cut_at_continue_tag(rendered, final_content)
    return rendered


def _cut_at_continue_tag(rendered: str, final_content: str) -> str:
    tag = _CONTINUE_TAG.strip()
    if final_content.strip() not in rendered or tag not in rendered:
        raise ChatTemplateError("continue_final_message: the template dropped the final message's content")
    loc = rendered.rindex(tag)
    if rendered[loc : loc + len(_CONTINUE_TAG)] == _CONTINUE_TAG:
        return rendered[:loc]
    return rendered[:loc].rstrip()  # the template trimmed the tag's trailing space: trim like transformers


def select_chat_template(
    templates: str | Mapping[str, str] | None, name: str | None = None, has_tools: bool = False
) -> str:
    """Pick the template to use, with transformers' rules for checkpoints that ship several."""
    if isinstance(templates, Mapping):
        if name is not None and name in templates:
            return templates[name]
        if name is None:
            if has_tools and "tool_use" in templates:
                return templates["tool_use"]
            if "default" in templates:
                return templates["default"]
            raise ChatTemplateError(
                f"the model has several chat templates and none is the default: {sorted(templates)}"
            )
        return name  # not a known name: the caller passed a template's text
    if name is not None:
        return name
    if templates is None:
        raise ChatTemplateError("the model has no chat template; pass one explicitly")
    return templates
