"""Server-side request options agents depend on (attached files, SSE keep-alive, reasoning effort),
their command-line flags, and the capabilities `/v1/models` reports from them."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from dgjax.serving.content import PDF_MIME_TYPES, TEXT_EXTENSIONS, TEXT_MIME_TYPES, ContentLimits
from dgjax.serving.reasoning_effort import ReasoningControls, UnsupportedEffort, template_variables
from dgjax.serving.tool_output import OutputParsing
from dgjax.text.reasoning import reasoning_parser_choices
from dgjax.text.tool_parsers import tool_parser_choices

DEFAULT_SSE_KEEPALIVE_S = 10.0


@dataclasses.dataclass(frozen=True)
class ServingOptions:
    content: ContentLimits = ContentLimits()
    # Seconds of silence on a stream (queued, prefilling, or a long gap) before an SSE comment
    # keeps proxies and clients from timing out; 0 disables.
    sse_keepalive_s: float = DEFAULT_SSE_KEEPALIVE_S
    unsupported_reasoning_effort: UnsupportedEffort = UnsupportedEffort.IGNORE
    # Output parsers: "auto" reads the chat template, "none" turns parsing off, or a parser name.
    tool_call_parser: str = "auto"
    reasoning_parser: str = "auto"


def add_serving_args(p: argparse.ArgumentParser) -> None:
    from dgjax.engine_args import parse_size

    d = ServingOptions()
    g = p.add_argument_group("requests")
    g.add_argument("--max-file-bytes", type=parse_size, default=d.content.max_file_bytes,
                   help="largest attached file (decoded) in a chat message, e.g. 10MiB")
    g.add_argument("--max-pdf-pages", type=int, default=d.content.max_pdf_pages,
                   help="PDF attachments with more pages get 400")
    g.add_argument("--sse-keepalive", type=float, default=d.sse_keepalive_s,
                   help="seconds without output after which a stream sends an SSE comment "
                        "(': keep-alive'); 0 disables")
    g.add_argument("--unsupported-reasoning-effort", default=d.unsupported_reasoning_effort.value,
                   choices=[m.value for m in UnsupportedEffort],
                   help="when the chat template has no reasoning switch: ignore reasoning_effort "
                        "(reported in the X-Reasoning-Effort header) or reject it with 400")
    g.add_argument("--tool-call-parser", default=d.tool_call_parser, choices=tool_parser_choices(),
                   help="tool-call markup to read from chat outputs (auto: from the chat template)")
    g.add_argument("--reasoning-parser", default=d.reasoning_parser,
                   choices=reasoning_parser_choices(),
                   help="return <think> text as reasoning_content (auto: when the chat template "
                        "mentions <think>)")
    g.add_argument("--enable-auto-tool-choice", action="store_true",
                   help="accepted for vLLM compatibility; tool calls are parsed whenever a "
                        "request sends tools and a parser is known")


def serving_options_from_args(a: argparse.Namespace) -> ServingOptions:
    if a.max_file_bytes < 1 or a.max_pdf_pages < 1 or a.sse_keepalive < 0:
        raise SystemExit("--max-file-bytes and --max-pdf-pages must be positive, "
                         "--sse-keepalive at least 0")
    return ServingOptions(
        content=ContentLimits(max_file_bytes=a.max_file_bytes, max_pdf_pages=a.max_pdf_pages),
        sse_keepalive_s=a.sse_keepalive,
        unsupported_reasoning_effort=UnsupportedEffort(a.unsupported_reasoning_effort),
        tool_call_parser=a.tool_call_parser, reasoning_parser=a.reasoning_parser)


def model_capabilities(template_variables: set[str], controls: ReasoningControls,
                       options: ServingOptions) -> dict[str, Any]:
    """The `capabilities` field of this model's `/v1/models` entry: what a client may send."""
    return {
        "tools": "tools" in template_variables,  # the chat template renders tool definitions
        "chat_template_kwargs": True,
        "reasoning_effort": {"supported": controls.supported,
                             "when_unsupported": options.unsupported_reasoning_effort.value,
                             **controls.describe()},
        "input": {
            "text": True,
            "image": False,
            "audio": False,
            "file": {"mime_types": [*PDF_MIME_TYPES, "text/*", *sorted(TEXT_MIME_TYPES)],
                     "text_file_extensions": sorted(TEXT_EXTENSIONS),
                     "max_file_bytes": options.content.max_file_bytes,
                     "max_pdf_pages": options.content.max_pdf_pages},
        },
        "sse_keepalive_s": options.sse_keepalive_s or None,
    }


def context_fields(tokenizer, options: ServingOptions) -> dict[str, Any]:
    """The ServerContext fields derived from the options and the model's chat template."""
    variables, literals = template_variables(tokenizer.chat_template)
    controls = ReasoningControls.from_variables(variables, literals)
    return {"options": options, "reasoning": controls,
            "capabilities": model_capabilities(variables, controls, options),
            "output_parsing": OutputParsing.from_tokenizer(tokenizer, options.tool_call_parser,
                                                           options.reasoning_parser)}
