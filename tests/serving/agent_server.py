"""The server the agent-API tests share: tiny-chat's weights and tokenizer behind the Qwen3 chat
template (tools, `enable_thinking`), small attachment limits, fast SSE keep-alives and a single
decode slot (so a second request really waits in the queue)."""

from __future__ import annotations

import json
import os
import shutil

from dgjax.serving.content import ContentLimits
from dgjax.serving.options import ServingOptions
from serving_harness import MODEL_DIR, RunningServer, engine_config

QWEN3_TEMPLATE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                              "text", "templates", "qwen3_style.jinja")
MAX_FILE_BYTES = 4096
MAX_PDF_PAGES = 3
KEEPALIVE_S = 0.2
MAX_MODEL_LEN = 1024
AGENT_NAME = "agent-test"


def model_dir_with_template(path: str, template: str) -> str:
    """tiny-chat with another chat template: weights linked, tokenizer files copied."""
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(MODEL_DIR):
        src, dst = os.path.join(MODEL_DIR, name), os.path.join(path, name)
        if name.endswith(".safetensors"):
            os.symlink(src, dst)
        else:
            shutil.copy(src, dst)
    config_path = os.path.join(path, "tokenizer_config.json")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    config["chat_template"] = template
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    return path


def start_agent_server(path: str) -> RunningServer:
    with open(QWEN3_TEMPLATE, encoding="utf-8") as f:
        model_dir = model_dir_with_template(path, f.read())
    options = ServingOptions(content=ContentLimits(max_file_bytes=MAX_FILE_BYTES,
                                                   max_pdf_pages=MAX_PDF_PAGES),
                             sse_keepalive_s=KEEPALIVE_S)
    config = engine_config(max_model_len=MAX_MODEL_LEN, max_concurrency=1, decode_buckets=(1,),
                           num_pages=160)
    return RunningServer(config, served_model_name=AGENT_NAME, model_dir=model_dir,
                         options=options)
