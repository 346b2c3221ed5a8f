"""`reasoning_effort` -> the switches the model's own chat template reads.

There is no common switch: Qwen3, GLM-4.5+ and Gemma-style templates read `enable_thinking`,
DeepSeek-V3.1 and Kimi read `thinking` (DeepSeek defaults it to off), gpt-oss (Harmony) reads
`reasoning_effort` itself and knows low/medium/high. Rather than match model names, we read which
of these variables the template actually uses (jinja's AST), so a fine-tune or a new release of a
family is handled by what its template says. The mapping:

- a template with an effort variable gets the nearest level it knows (gpt-oss: none/minimal ->
  low, xhigh -> high), plus thinking on when it also has an on/off switch;
- a template with an on/off switch gets it off for none/minimal and on for low..xhigh;
- a template with neither cannot honour the field. vLLM and SGLang accept it and let the template
  ignore it, and agents send it by default, so we accept it too (`--unsupported-reasoning-effort
  reject` makes it a 400 instead); either way the response says what happened in the
  `X-Reasoning-Effort` header and `/v1/models` lists the mapping up front.

Explicit `chat_template_kwargs` win over the mapping.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from typing import Any

import jinja2.meta
import jinja2.nodes

from dgjax.serving.errors import bad_request
from dgjax.text.chat_template import ChatTemplateError, compile_chat_template

EFFORT_LEVELS = ("none", "minimal", "low", "medium", "high", "xhigh")
THINKING_SWITCHES = ("enable_thinking", "thinking")
EFFORT_VARIABLE = "reasoning_effort"
# A template that reads `reasoning_effort` but names fewer levels than this (gpt-oss quotes only its
# default, "medium") is assumed to know the levels gpt-oss was trained with.
DEFAULT_TEMPLATE_LEVELS = ("low", "medium", "high")
HEADER = "X-Reasoning-Effort"


class UnsupportedEffort(str, enum.Enum):
    """What to do with `reasoning_effort` when the template has no reasoning switch."""

    IGNORE = "ignore"
    REJECT = "reject"


@dataclasses.dataclass(frozen=True)
class ReasoningControls:
    """The reasoning variables one model's chat template(s) read."""

    switches: tuple[str, ...] = ()  # on/off variables, e.g. ("enable_thinking",)
    effort_levels: tuple[str, ...] = ()  # levels passed as `reasoning_effort`; () if not read

    @classmethod
    def from_templates(cls, templates: str | Mapping[str, str] | None) -> "ReasoningControls":
        return cls.from_variables(*template_variables(templates))

    @classmethod
    def from_variables(cls, variables: set[str], literals: set[str]) -> "ReasoningControls":
        """From what `template_variables` found in the template(s)."""
        switches = tuple(s for s in THINKING_SWITCHES if s in variables)
        levels: tuple[str, ...] = ()
        if EFFORT_VARIABLE in variables:
            named = {lvl for lvl in EFFORT_LEVELS if lvl in literals}
            if len(named - {"none"}) < 2:
                named |= set(DEFAULT_TEMPLATE_LEVELS)
            levels = tuple(lvl for lvl in EFFORT_LEVELS if lvl in named)
        return cls(switches, levels)

    @property
    def supported(self) -> bool:
        return bool(self.switches or self.effort_levels)

    def template_kwargs(self, effort: str) -> dict[str, Any] | None:
        """The template variables that express `effort`; None when the template has none."""
        off = effort in ("none", "minimal")
        if self.effort_levels:
            if effort in self.effort_levels:
                kwargs: dict[str, Any] = {EFFORT_VARIABLE: effort}
            elif off and self.switches:
                return {s: False for s in self.switches}
            else:
                kwargs = {EFFORT_VARIABLE: _nearest(effort, self.effort_levels)}
            if self.switches:
                kwargs.update({s: effort != "none" for s in self.switches})
            return kwargs
        if self.switches:
            return {s: not off for s in self.switches}
        return None

    def describe(self) -> dict[str, Any]:
        """For /v1/models: what each level turns into (null: ignored, the template cannot)."""
        return {"template_variables": [*self.switches] + ([EFFORT_VARIABLE]
                                                          if self.effort_levels else []),
                "template_effort_levels": list(self.effort_levels) or None,
                "mapping": {lvl: self.template_kwargs(lvl) for lvl in EFFORT_LEVELS}}


def template_variables(templates: str | Mapping[str, str] | None) -> tuple[set[str], set[str]]:
    """The variables a model's chat template(s) take from the caller, and their string literals."""
    texts = list(templates.values()) if isinstance(templates, Mapping) else [templates or ""]
    variables: set[str] = set()
    literals: set[str] = set()
    for text in texts:
        try:
            ast = compile_chat_template(text).environment.parse(text)
        except (ChatTemplateError, jinja2.TemplateError):
            continue  # a broken template fails every request with its own 400
        # literals first: find_undeclared_variables compiles the AST, which folds constants
        literals |= {n.value for n in ast.find_all(jinja2.nodes.Const) if isinstance(n.value, str)}
        variables |= jinja2.meta.find_undeclared_variables(ast)
    return variables, literals


def _nearest(effort: str, levels: tuple[str, ...]) -> str:
    """The closest level in EFFORT_LEVELS order; ties go to the lower one."""
    rank = EFFORT_LEVELS.index(effort)
    return min(levels, key=lambda lvl: (abs(EFFORT_LEVELS.index(lvl) - rank),
                                        EFFORT_LEVELS.index(lvl)))


def parse_reasoning_effort(body: Mapping[str, Any]) -> str | None:
    value = body.get("reasoning_effort")
    if value is None:
        return None
    if value not in EFFORT_LEVELS:
        raise bad_request(f"'reasoning_effort' must be one of {', '.join(EFFORT_LEVELS)}; got "
                          f"{json.dumps(value)[:40]}.", "reasoning_effort", "invalid_value")
    return value


def apply_reasoning_effort(body: Mapping[str, Any], template_kwargs: dict[str, Any],
                           controls: ReasoningControls,
                           policy: UnsupportedEffort) -> dict[str, str]:
    """Validate `reasoning_effort`, merge its template variables into `template_kwargs` (in place,
    under the client's own `chat_template_kwargs`), and return the response header saying what
    was applied (empty when the field was not sent)."""
    effort = parse_reasoning_effort(body)
    if effort is None:
        return {}
    mapped = controls.template_kwargs(effort)
    if mapped is None:
        if policy is UnsupportedEffort.REJECT:
            raise bad_request("This model's chat template has no reasoning switch (no "
                              "enable_thinking, thinking or reasoning_effort variable), so "
                              "'reasoning_effort' cannot be honoured.", "reasoning_effort",
                              "unsupported")
        return {HEADER: f"{effort}; ignored: the chat template has no reasoning switch"}
    applied = {}
    for key, value in mapped.items():
        template_kwargs.setdefault(key, value)
        applied[key] = template_kwargs[key]
    return {HEADER: f"{effort}; " + ", ".join(f"{k}={json.dumps(v)}" for k, v in applied.items())}
