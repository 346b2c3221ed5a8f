"""How each model family writes tool calls, as data the grammar builder turns into Lark rules.

A tool-call section is `section_begin`, then calls separated by `call_sep`, each
`call_begin <body> call_end`, then `section_end`. A function call's body is
`function_prefix(name) <arguments JSON> function_suffix`; a custom tool's body (OpenAI's
free-form tools, constrained by a Lark grammar or a regex) is `custom_prefix(name) <raw input>
custom_suffix`. `trigger` is where the section starts: with `tool_choice: "auto"` the model writes
free text until it emits the trigger, and only then is the output constrained (a lazy grammar).

The server's tool-call parser (`dgjax.text.tool_parsers`, chosen from the chat template or by
flag) reads these formats back, so the format is picked by that parser's name. A family whose
parser exists but has no grammar here (Qwen3-Coder and GLM XML styles, whose string values are
raw text, see `XmlArguments`) are registered here too; another family gets one by registering a
`ToolCallFormat` under the parser's name (`register_format`).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Callable

__all__ = ["ToolCallFormat", "XmlArguments", "HERMES", "DEEPSEEK_V3", "DEEPSEEK_V31", "QWEN3_CODER",
           "GLM45", "FORMATS", "register_format", "detect_format", "split_hermes_custom_call"]


def _json_name(name: str) -> str:
    return json.dumps(name, ensure_ascii=False)


@dataclasses.dataclass(frozen=True)
class XmlArguments:
    """Arguments written as one tagged block per parameter instead of a JSON object:
    `param_begin(key) VALUE value_end`. A string VALUE is raw text (it may not contain `closing`,
    where the parser cuts the value), any other type is JSON (`structured.xml_arguments`)."""

    param_begin: Callable[[str], str]
    value_end: str
    closing: str


@dataclasses.dataclass(frozen=True)
class ToolCallFormat:
    name: str
    trigger: str
    section_begin: str
    call_begin: str
    call_end: str
    call_sep: str
    section_end: str
    function_prefix: Callable[[str], str]
    function_suffix: str
    custom_prefix: Callable[[str], str]
    custom_suffix: str
    # Marker strings that may be single (possibly special) tokens: the grammar refers to a special
    # one by token id, since special tokens never match text.
    markers: tuple[str, ...] = ()
    # None: the arguments are one JSON object (function_prefix ... function_suffix around it)
    xml_arguments: XmlArguments | None = None

    def __post_init__(self) -> None:
        if not (self.section_begin + self.call_begin).startswith(self.trigger):
            raise ValueError(f"{self.name}: the section must start with its trigger")


# Qwen2.5 / Qwen3 / Qwen3-Next / Hermes: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
# A custom tool's raw input follows a name-only JSON line: {"name": "X"}\n<raw input>.
HERMES = ToolCallFormat(
    name="hermes",
    trigger="<tool_call>",
    section_begin="",
    call_begin="<tool_call>\n",
    call_end="\n</tool_call>",
    call_sep="\n",
    section_end="",
    function_prefix=lambda name: '{"name": ' + _json_name(name) + ', "arguments": ',
    function_suffix="}",
    custom_prefix=lambda name: '{"name": ' + _json_name(name) + "}\n",
    custom_suffix="",
    markers=("<tool_call>", "</tool_call>"),
)

_DS = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
       "<｜tool▁call▁end｜>", "<｜tool▁sep｜>")

# DeepSeek-V3 / R1 chat template: <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```
DEEPSEEK_V3 = ToolCallFormat(
    name="deepseek_v3",
    trigger=_DS[0],
    section_begin=_DS[0],
    call_begin=_DS[2],
    call_end=_DS[3],
    call_sep="\n",
    section_end=_DS[1],
    function_prefix=lambda name: f"function{_DS[4]}{name}\n```json\n",
    function_suffix="\n```",
    custom_prefix=lambda name: f"custom{_DS[4]}{name}\n```\n",
    custom_suffix="\n```",
    markers=_DS,
)

# DeepSeek-V3.1: <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
DEEPSEEK_V31 = dataclasses.replace(
    DEEPSEEK_V3,
    name="deepseek_v31",
    call_sep="",
    function_prefix=lambda name: f"{name}{_DS[4]}",
    function_suffix="",
    custom_prefix=lambda name: f"{name}{_DS[4]}",
    custom_suffix="",
)

# Qwen3-Coder:
# <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n</function>\n</tool_call>
# A custom tool's raw input stands where the parameters would:
# <function=NAME>\n<input>\n</function>.
QWEN3_CODER = ToolCallFormat(
    name="qwen3_coder",
    trigger="<tool_call>",
    section_begin="",
    call_begin="<tool_call>\n",
    call_end="\n</tool_call>",
    call_sep="\n",
    section_end="",
    function_prefix=lambda name: f"<function={name}>\n",
    function_suffix="</function>",
    custom_prefix=lambda name: f"<function={name}>\n",
    custom_suffix="\n</function>",
    markers=("<tool_call>", "</tool_call>"),
    xml_arguments=XmlArguments(lambda key: f"<parameter={key}>\n", "\n</parameter>\n",
                               "</parameter>"),
)

# GLM-4.5 / 4.6: <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call>
# A custom tool's raw input follows the name line: <tool_call>NAME\n<input></tool_call>.
_GLM = ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>")
GLM45 = ToolCallFormat(
    name="glm45",
    trigger="<tool_call>",
    section_begin="",
    call_begin="<tool_call>",
    call_end="</tool_call>",
    call_sep="\n",
    section_end="",
    function_prefix=lambda name: f"{name}\n",
    function_suffix="",
    custom_prefix=lambda name: f"{name}\n",
    custom_suffix="",
    markers=_GLM,
    xml_arguments=XmlArguments(lambda key: f"<arg_key>{key}</arg_key>\n<arg_value>",
                               "</arg_value>\n", "</arg_value>"),
)

FORMATS: dict[str, ToolCallFormat] = {f.name: f for f in (HERMES, DEEPSEEK_V3, DEEPSEEK_V31,
                                                          QWEN3_CODER, GLM45)}


def register_format(fmt: ToolCallFormat) -> None:
    FORMATS[fmt.name] = fmt


_PARSER_FORMATS = {"hermes": "hermes", "qwen3": "hermes", "qwen3_next": "hermes",
                   "qwen3_coder": "qwen3_coder", "qwen3_xml": "qwen3_coder", "glm45": "glm45",
                   "glm47": "glm45", "glm4_moe": "glm45"}


def detect_format(parser_name: str | None, chat_template: str | None) -> ToolCallFormat | None:
    """The grammar format for the server's tool-call parser (`dgjax.text.tool_parsers` names);
    without one, the format the chat template teaches (Hermes, the common JSON style, by default).
    None: no grammar is registered for that parser's format."""
    template = chat_template or ""
    if parser_name is None:
        parser_name = "deepseek_v31" if _DS[0] in template else "hermes"
    if parser_name.startswith("deepseek"):
        # one parser reads both DeepSeek shapes; the template says which one the model writes
        return DEEPSEEK_V3 if "```json" in template else DEEPSEEK_V31
    return FORMATS.get(_PARSER_FORMATS.get(parser_name, parser_name))


def split_hermes_custom_call(body: str) -> tuple[str, str] | None:
    """(name, raw input) of a Hermes custom-tool call body `{"name": "X"}\\n<input>`, else None."""
    head, sep, rest = body.partition("\n")
    if not sep:
        return None
    try:
        obj = json.loads(head)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or set(obj) != {"name"} or not isinstance(obj["name"], str):
        return None
    return obj["name"], rest
