"""Message content parts: text, attached PDFs and text/code files, tool and developer messages;
and the 400s (naming the exact field) for every way an attachment can be unusable.

The exact prompt text is checked by rendering through a template that prints each message (the
real parser and renderer, no server); the HTTP tests run the same inputs through the real server
and compare prompt token counts with transformers' rendering of the equivalent plain strings."""

from __future__ import annotations

import base64
import json

import pytest

from agent_server import AGENT_NAME, MAX_FILE_BYTES, MAX_PDF_PAGES, model_dir_with_template
from dgjax.serving.chat import render_chat_prompt
from dgjax.serving.content import ContentLimits
from dgjax.serving.errors import APIError
from dgjax.serving.protocol import ModelDefaults, parse_chat_request
from dgjax.text.tokenizer import Tokenizer
from pdf_fixtures import data_url, encrypt_pdf, file_part, make_pdf
from serving_harness import hf_chat_ids

PAGES = [["Quarterly report", "Revenue grew (a lot) in Q3."], ["Caf\u00e9 prices: 3 EUR"]]
PRINT_TEMPLATE = ("{% for m in messages %}{{ m.role }}{% if m.name %}({{ m.name }}){% endif %}"
                  "{% if m.tool_call_id %}[{{ m.tool_call_id }}]{% endif %}:{{ m.content }}|"
                  "{% endfor %}")
LIMITS = ContentLimits(max_file_bytes=MAX_FILE_BYTES, max_pdf_pages=MAX_PDF_PAGES)


def wrapped(text: str, filename: str | None) -> str:
    """How an attachment appears in the prompt (the format content.py documents)."""
    name = f' name="{filename}"' if filename else ""
    return f"<file{name}>\n{text}\n</file>"


def pdf_text(pages: list[list[str]]) -> str:
    return "\n\n".join("\n".join(lines) for lines in pages)


@pytest.fixture(scope="module")
def printing_tokenizer(tmp_path_factory) -> Tokenizer:
    return Tokenizer.from_dir(model_dir_with_template(
        str(tmp_path_factory.mktemp("printing")), PRINT_TEMPLATE))


def rendered(tok: Tokenizer, messages: list[dict], **body) -> str:
    req = parse_chat_request({"messages": messages, **body}, 2048, ModelDefaults(), LIMITS)
    return tok.decode(render_chat_prompt(tok, req))


def test_pdf_attachment_becomes_its_page_text(printing_tokenizer):
    pdf = make_pdf(PAGES)
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "Summarize this."},
        file_part(pdf, "application/pdf", "report.pdf")]}]
    assert rendered(printing_tokenizer, messages) == (
        "user:Summarize this.\n" + wrapped(pdf_text(PAGES), "report.pdf") + "|")


@pytest.mark.parametrize("mime,filename", [
    ("text/markdown", "notes.md"),
    ("application/octet-stream", "tool.py"),  # generic type: the extension decides
    ("video/mp2t", "app.ts"),  # what many systems call a .ts file
    ("application/json", None),
    (None, "script.sh"),  # bare base64: the name decides
])
def test_text_and_code_files_by_type_or_extension(printing_tokenizer, mime, filename):
    source = 'def f(x):\n    return {"k": x}  # caf\u00e9\n'
    messages = [{"role": "user", "content": [file_part(source.encode(), mime, filename)]}]
    assert rendered(printing_tokenizer, messages) == f"user:{wrapped(source, filename)}|"


def test_base64_variants_bom_and_the_responses_api_shape(printing_tokenizer):
    text = "line one\nline two \u2713\n"
    raw = ("\ufeff" + text).encode()  # a UTF-8 BOM is not part of the text
    b64 = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    folded = "\n".join(b64[i:i + 8] for i in range(0, len(b64), 8))  # MIME-style line breaks
    messages = [{"role": "user", "content": [
        {"type": "input_file", "filename": "a.txt", "file_data": f"data:text/plain;base64,{folded}"},
        {"type": "input_text", "text": "and"},
        {"type": "file", "file": {"file_data": data_url(raw, "text/plain; charset=utf-8")}}]}]
    assert rendered(printing_tokenizer, messages) == (
        f"user:{wrapped(text, 'a.txt')}\nand\n{wrapped(text, None)}|")


def test_tool_developer_and_named_messages_reach_the_template(printing_tokenizer):
    call = {"id": "call_7", "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"q": "x"})}}
    messages = [
        {"role": "developer", "content": [{"type": "text", "text": "Be terse."}]},
        {"role": "user", "name": "alice", "content": "Find x."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_7", "name": "lookup",
         "content": [{"type": "text", "text": "x=1"}, {"type": "text", "text": "x=2"}]},
    ]
    assert rendered(printing_tokenizer, messages) == (
        "system:Be terse.|user(alice):Find x.|assistant:|tool(lookup)[call_7]:x=1\nx=2|")


def test_owner_password_only_pdf_is_read(printing_tokenizer):
    """Encrypted for permissions only (empty user password), as viewers open it."""
    pdf = encrypt_pdf(make_pdf(PAGES), user_password="")
    messages = [{"role": "user", "content": [file_part(pdf, "application/pdf", "r.pdf")]}]
    assert rendered(printing_tokenizer, messages) == f"user:{wrapped(pdf_text(PAGES), 'r.pdf')}|"


# ---- over HTTP, against the agent server (limits: MAX_FILE_BYTES, MAX_PDF_PAGES) ----

def post(http, messages, **body):
    return http.post("/v1/chat/completions",
                     json={"model": AGENT_NAME, "messages": messages, "max_tokens": 4,
                           "temperature": 0.0, **body})


def test_pdf_request_prompt_matches_transformers_rendering(agent_http, agent_server):
    from transformers import AutoTokenizer

    pdf = make_pdf(PAGES)
    question = {"type": "text", "text": "What grew?"}
    r = post(agent_http, [{"role": "user", "content": [question,
                                                       file_part(pdf, "application/pdf", "q.pdf")]}])
    assert r.status_code == 200, r.text
    hf = AutoTokenizer.from_pretrained(agent_server.dgjax.ctx.model_dir)
    plain = [{"role": "user", "content": "What grew?\n" + wrapped(pdf_text(PAGES), "q.pdf")}]
    assert r.json()["usage"]["prompt_tokens"] == len(hf_chat_ids(hf, plain))


def test_tool_message_parts_over_http_match_plain_strings(agent_http):
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    history = [{"role": "developer", "content": "Use tools."}, {"role": "user", "content": "Go"},
               {"role": "assistant", "content": None, "tool_calls": [call]}]
    parts = post(agent_http, history + [{"role": "tool", "tool_call_id": "c1", "content": [
        {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}], tools=tools)
    plain = post(agent_http, history + [{"role": "tool", "tool_call_id": "c1", "content": "a\nb"}],
                 tools=tools)
    assert parts.status_code == plain.status_code == 200, parts.text
    assert parts.json()["usage"]["prompt_tokens"] == plain.json()["usage"]["prompt_tokens"]
    assert parts.json()["choices"][0]["message"] == plain.json()["choices"][0]["message"]


def test_openai_sdk_sends_a_file_part(agent_server):
    client = agent_server.openai()
    note = b"The meeting moved to Friday."
    out = client.chat.completions.create(
        model=AGENT_NAME, max_tokens=3, temperature=0.0,
        messages=[{"role": "user", "content": [
            {"type": "text", "text": "When is the meeting?"},
            {"type": "file", "file": {"filename": "note.txt",
                                      "file_data": data_url(note, "text/plain")}}]}])
    inline = client.chat.completions.create(
        model=AGENT_NAME, max_tokens=3, temperature=0.0,
        messages=[{"role": "user", "content": "When is the meeting?\n"
                   + wrapped(note.decode(), "note.txt")}])
    assert out.usage.prompt_tokens == inline.usage.prompt_tokens


def _bad_parts():
    pdf = make_pdf(PAGES)
    big = b"x" * (MAX_FILE_BYTES + 1)
    return {
        "bad_base64": ({"type": "file", "file": {"file_data": "data:text/plain;base64,ab@c"}},
                       "file.file_data", "invalid_base64"),
        "not_base64_url": ({"type": "file", "file": {"file_data": "data:text/plain,hello"}},
                           "file.file_data", "invalid_file_data"),
        "unsupported_mime": (file_part(b"PK\x03\x04zip", "application/zip", "a.zip"),
                             "file.file_data", "unsupported_file_type"),
        "non_utf8_text": (file_part("na\u00efve".encode("latin-1"), "text/plain", "a.txt"),
                          "file.file_data", "invalid_utf8"),
        "encrypted_pdf": (file_part(encrypt_pdf(pdf, "secret"), "application/pdf", "s.pdf"),
                          "file.file_data", "pdf_encrypted"),
        "corrupt_pdf": (file_part(pdf[: len(pdf) // 2], "application/pdf", "c.pdf"),
                        "file.file_data", "pdf_unreadable"),
        "too_large": (file_part(big, "text/plain", "big.txt"), "file.file_data", "file_too_large"),
        "too_many_pages": (file_part(make_pdf([["p"]] * (MAX_PDF_PAGES + 1)), "application/pdf"),
                           "file.file_data", "pdf_too_many_pages"),
        "file_id": ({"type": "file", "file": {"file_id": "file-abc"}}, "file.file_id",
                    "unsupported"),
        "no_file_data": ({"type": "file", "file": {"filename": "a.txt"}}, "file.file_data",
                         "missing"),
        "image_url": ({"type": "image_url", "image_url": {"url": data_url(b"\x89PNG", "image/png")}},
                      "", "image_input_unsupported"),
        "image_file": (file_part(b"\x89PNG\r\n", "image/png", "a.png"), "file.file_data",
                       "image_input_unsupported"),
        "unknown_type": ({"type": "video", "video": {}}, "type", "unsupported"),
    }


@pytest.mark.parametrize("case", list(_bad_parts()))
@pytest.mark.parametrize("stream", [False, True], ids=["full", "stream"])
def test_unusable_attachments_are_400s_naming_the_field(agent_http, case, stream):
    part, suffix, code = _bad_parts()[case]
    messages = [{"role": "system", "content": "s"},
                {"role": "user", "content": [{"type": "text", "text": "look"}, part]}]
    r = post(agent_http, messages, stream=stream)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    param = "messages[1].content[1]" + (f".{suffix}" if suffix else "")
    assert (error["param"], error["code"], error["type"]) == (param, code,
                                                              "invalid_request_error")
    assert param in error["message"]


def test_image_input_error_through_the_openai_sdk(agent_server):
    import openai

    with pytest.raises(openai.BadRequestError) as info:
        agent_server.openai().chat.completions.create(
            model=AGENT_NAME, max_tokens=2,
            messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "https://example.invalid/a.png"}}]}])
    assert info.value.status_code == 400
    assert info.value.param == "messages[0].content[0]"
    assert "vision" in info.value.message


def test_invalid_message_fields_are_named():
    for messages, param in [
        ([{"role": "user", "content": "x", "name": 3}], "messages[0].name"),
        ([{"role": "tool", "content": "x", "tool_call_id": ["c"]}], "messages[0].tool_call_id"),
        ([{"role": "user", "content": [{"text": "no type"}]}], "messages[0].content[0].type"),
        ([{"role": "user", "content": [{"type": "text"}]}], "messages[0].content[0].text"),
        ([{"role": "user", "content": [{"type": "file", "file": "x"}]}],
         "messages[0].content[0].file"),
    ]:
        with pytest.raises(APIError) as info:
            parse_chat_request({"messages": messages}, 2048, ModelDefaults(), LIMITS)
        assert (info.value.status, info.value.param) == (400, param)
