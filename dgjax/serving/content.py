"""Chat message content -> prompt text: text parts, attached files (PDF, UTF-8 text and code).

OpenAI clients send `content` as a string or a list of parts. Text parts are joined with newlines;
a `file` part (`{"type": "file", "file": {"file_data": "data:<mime>;base64,...", "filename": ...}}`,
or the Responses API's flat `input_file`) becomes its extracted text, wrapped in
`<file name="...">...</file>` so the model can tell documents from the question. Every refusal is a
400 naming the exact field (`messages[2].content[1].file.file_data`): a client that attached the
wrong thing must learn what, not get an answer about a file the model never saw.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
from typing import Any

from dgjax.serving.errors import APIError, bad_request

DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_PDF_PAGES = 100  # OpenAI's own per-file page limit

PDF_MIME_TYPES = ("application/pdf", "application/x-pdf")
# Types that are text whatever their subtype says; the bytes must still be UTF-8.
TEXT_MIME_TYPES = frozenset({
    "application/json", "application/ld+json", "application/x-ndjson", "application/xml",
    "application/javascript", "application/x-javascript", "application/ecmascript",
    "application/typescript", "application/x-typescript", "application/x-python",
    "application/x-python-code", "application/x-sh", "application/x-shellscript",
    "application/yaml", "application/x-yaml", "application/toml", "application/sql",
    "application/x-tex", "application/x-latex", "application/graphql", "application/csv",
    "application/x-httpd-php", "application/x-perl", "application/x-ruby",
})
# Extensions browsers and SDKs label badly (.ts as video/mp2t, .py as application/octet-stream):
# a file with one of these names is read as text whatever its declared type.
TEXT_EXTENSIONS = frozenset({
    ".txt", ".md", ".markdown", ".rst", ".adoc", ".org", ".tex", ".csv", ".tsv", ".json",
    ".jsonl", ".ndjson", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".conf", ".env", ".xml",
    ".html", ".htm", ".css", ".scss", ".less", ".svg", ".log", ".diff", ".patch", ".sql",
    ".graphql", ".proto", ".py", ".pyi", ".ipynb", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx",
    ".vue", ".svelte", ".java", ".kt", ".kts", ".scala", ".groovy", ".gradle", ".c", ".h",
    ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".cu", ".cuh", ".m", ".mm", ".swift", ".go", ".rs",
    ".rb", ".php", ".pl", ".pm", ".lua", ".r", ".jl", ".dart", ".cs", ".fs", ".vb", ".hs",
    ".ml", ".mli", ".ex", ".exs", ".erl", ".clj", ".lisp", ".el", ".vim", ".sh", ".bash",
    ".zsh", ".fish", ".ps1", ".bat", ".cmake", ".mk", ".dockerfile", ".nix", ".zig", ".v",
    ".sv", ".vhd", ".asm", ".s", ".tf", ".hcl", ".bzl", ".gitignore", ".mlir",
})
TEXT_FILENAMES = frozenset({"makefile", "dockerfile", "readme", "license", "cmakelists.txt"})
_GENERIC_MIME = ("", "application/octet-stream", "binary/octet-stream")
_TEXT_PART_TYPES = ("text", "input_text", "output_text")
_FILE_PART_TYPES = ("file", "input_file")
_IMAGE_PART_TYPES = ("image_url", "input_image", "image")
_AUDIO_PART_TYPES = ("input_audio", "audio")


@dataclasses.dataclass(frozen=True)
class ContentLimits:
    """Per-file limits for attached documents (the request body limit bounds their total)."""

    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    max_pdf_pages: int = DEFAULT_MAX_PDF_PAGES


def message_text(content: Any, param: str, limits: ContentLimits) -> str:
    """One message's `content` (a string or a list of parts) as prompt text."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad_request(f"'{param}' must be a string or an array of content parts.", param,
                          "invalid_type")
    return "\n".join(_part_text(part, f"{param}[{j}]", limits) for j, part in enumerate(content))


def _part_text(part: Any, param: str, limits: ContentLimits) -> str:
    if not isinstance(part, dict):
        raise bad_request(f"'{param}' must be an object.", param, "invalid_type")
    kind = part.get("type")
    if not isinstance(kind, str):
        raise bad_request(f"'{param}.type' is required and must be a string.", f"{param}.type",
                          "missing" if kind is None else "invalid_type")
    if kind in _TEXT_PART_TYPES:
        return _string_field(part, "text", param)
    if kind == "refusal":  # an assistant turn replayed from an earlier answer
        return _string_field(part, "refusal", param)
    if kind in _FILE_PART_TYPES:
        nested = part.get("file")
        if nested is None and kind == "input_file":  # the Responses API puts the fields flat
            return file_part_text(part, param, limits)
        if not isinstance(nested, dict):
            raise bad_request(f"'{param}.file' must be an object with 'file_data' and "
                              "'filename'.", f"{param}.file", "invalid_type")
        return file_part_text(nested, f"{param}.file", limits)
    if kind in _IMAGE_PART_TYPES:
        raise bad_request(f"'{param}' is an image ({kind!r}), but this model has no vision input: "
                          "it reads text only. Send text or a document (PDF or text file) "
                          "instead.", param, "image_input_unsupported")
    if kind in _AUDIO_PART_TYPES:
        raise bad_request(f"'{param}' is audio ({kind!r}), but this model has no audio input.",
                          param, "audio_input_unsupported")
    raise bad_request(f"'{param}.type': content part type {kind!r} is not supported; expected "
                      "'text' or 'file'.", f"{param}.type", "unsupported")


def _string_field(part: dict[str, Any], name: str, param: str) -> str:
    value = part.get(name)
    if not isinstance(value, str):
        raise bad_request(f"'{param}.{name}' is required and must be a string.",
                          f"{param}.{name}", "missing" if value is None else "invalid_type")
    return value


def file_part_text(file: dict[str, Any], param: str, limits: ContentLimits) -> str:
    """A file part's fields (`file_data`, `filename`, `file_id`) -> the file's text, wrapped."""
    filename = file.get("filename")
    if filename is not None and not isinstance(filename, str):
        raise bad_request(f"'{param}.filename' must be a string.", f"{param}.filename",
                          "invalid_type")
    data_param = f"{param}.file_data"
    file_data = file.get("file_data")
    if file_data is None:
        if file.get("file_id") is not None:
            raise bad_request(f"'{param}.file_id': this server has no Files API, so file ids "
                              "cannot be resolved; send the file inline as 'file_data' (a base64 "
                              "data URL).", f"{param}.file_id", "unsupported")
        if file.get("file_url") is not None:
            raise bad_request(f"'{param}.file_url': this server does not fetch URLs; send the "
                              "file inline as 'file_data' (a base64 data URL).",
                              f"{param}.file_url", "unsupported")
        raise bad_request(f"'{data_param}' is required (a data URL such as "
                          "'data:application/pdf;base64,...').", data_param, "missing")
    if not isinstance(file_data, str):
        raise bad_request(f"'{data_param}' must be a string.", data_param, "invalid_type")
    mime, data = decode_file_data(file_data, data_param, limits.max_file_bytes)
    text = file_bytes_to_text(data, mime, filename, data_param, limits)
    label = f' name="{_attribute(filename)}"' if filename else ""
    return f"<file{label}>\n{text}\n</file>"


def _attribute(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("\n", " ")


def decode_file_data(file_data: str, param: str, max_bytes: int) -> tuple[str, bytes]:
    """(media type, bytes) of a base64 data URL or of bare base64 (type then comes from the name)."""
    mime, payload = "", file_data
    if file_data[:5].lower() == "data:":
        header, sep, payload = file_data[5:].partition(",")
        if not sep:
            raise bad_request(f"'{param}' is not a valid data URL (no ',' after the media type).",
                              param, "invalid_file_data")
        fields = [f.strip().lower() for f in header.split(";")]
        mime = fields[0]
        if "base64" not in fields[1:]:
            raise bad_request(f"'{param}' must be base64-encoded ('data:<type>;base64,...').",
                              param, "invalid_file_data")
    payload = "".join(payload.split())  # MIME-style line breaks are common
    if len(payload) // 4 * 3 > max_bytes + 2:  # refuse before decoding
        raise _too_large(param, len(payload) // 4 * 3, max_bytes)
    payload = payload.replace("-", "+").replace("_", "/")  # the URL-safe alphabet too
    try:
        data = base64.b64decode(payload + "=" * (-len(payload) % 4), validate=True)
    except (binascii.Error, ValueError) as e:
        raise bad_request(f"'{param}' is not valid base64: {e}.", param,
                          "invalid_base64") from None
    if len(data) > max_bytes:
        raise _too_large(param, len(data), max_bytes)
    if not data:
        raise bad_request(f"'{param}' holds an empty file.", param, "empty_file")
    return mime, data


def _too_large(param: str, size: int, max_bytes: int) -> APIError:
    return bad_request(f"'{param}' holds a file of {size} bytes; the limit is {max_bytes} bytes "
                       "per file.", param, "file_too_large")


def file_kind(mime: str, filename: str | None, data: bytes) -> str | None:
    """'pdf', 'text', or None (unsupported) from the declared type, the name and the bytes."""
    base = os.path.basename(filename or "").lower()
    ext = os.path.splitext(base)[1]
    generic = mime in _GENERIC_MIME
    if mime in PDF_MIME_TYPES or (generic and ext == ".pdf"):
        return "pdf"  # a corrupt one included: the parser says what is wrong
    if (generic or ext == ".pdf") and data.startswith(b"%PDF-"):
        return "pdf"
    if ext in TEXT_EXTENSIONS or base in TEXT_FILENAMES:
        return "text"
    if mime.startswith("text/") or mime in TEXT_MIME_TYPES or mime.endswith(("+json", "+xml")):
        return "text"
    return None


def file_bytes_to_text(data: bytes, mime: str, filename: str | None, param: str,
                       limits: ContentLimits) -> str:
    kind = file_kind(mime, filename, data)
    if kind == "pdf":
        from dgjax.serving.pdf_text import pdf_to_text

        return pdf_to_text(data, param, limits.max_pdf_pages)
    if kind == "text":
        return utf8_text(data, param)
    described = f"type {mime!r}" if mime and mime not in _GENERIC_MIME else (
        f"file {filename!r}" if filename else "file of unknown type")
    if mime.startswith("image/"):
        raise bad_request(f"'{param}' is an image ({mime}), but this model has no vision input.",
                          param, "image_input_unsupported")
    raise bad_request(f"'{param}': unsupported {described}. Supported: PDF (application/pdf) and "
                      "UTF-8 text or source code (text/*, JSON, XML, YAML ... or a file name with "
                      "a known text extension).", param, "unsupported_file_type")


def utf8_text(data: bytes, param: str) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise bad_request(f"'{param}' is not UTF-8 text (invalid byte at offset {e.start}); "
                          "send text files UTF-8 encoded.", param, "invalid_utf8") from None
    if "\x00" in text:
        raise bad_request(f"'{param}' holds NUL bytes: it is a binary file, not text.", param,
                          "invalid_utf8")
    return text
