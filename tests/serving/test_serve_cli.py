"""`python -m dgjax.serve` as a user runs it: default model, flags, startup log line, SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from dgjax.serve import build_parser, default_model_dir, engine_config_from_args, parse_size

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_default_model_is_the_repos_tiny_chat():
    assert default_model_dir() == os.path.join(REPO_ROOT, "checkpoints", "tiny-chat")


@pytest.mark.parametrize("text,expected", [("123", 123), ("4k", 4000), ("2GiB", 2 * 2**30),
                                           ("1.5mb", 1_500_000), ("512 MiB", 512 * 2**20)])
def test_sizes_parse(text, expected):
    assert parse_size(text) == expected


def test_flags_map_to_the_engine_config():
    args = build_parser().parse_args([
        "--max-model-len", "1024", "--max-num-seqs", "8", "--dtype", "bfloat16", "--page-size",
        "32", "--num-pages", "99", "--kv-memory", "1GiB", "--max-queue", "3", "-tp", "2",
        "--no-prefix-cache", "--decode-buckets", "4,1,2", "--prefill-buckets", "32,128"])
    cfg = engine_config_from_args(args)
    assert (cfg.max_model_len, cfg.max_concurrency, cfg.dtype, cfg.page_size, cfg.num_pages,
            cfg.kv_memory_bytes, cfg.max_queue, cfg.tensor_parallel, cfg.enable_prefix_cache,
            cfg.decode_buckets, cfg.prefill_buckets) == (
        1024, 8, "bfloat16", 32, 99, 2**30, 3, 2, False, (1, 2, 4), (32, 128))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_entry_point_starts_serves_and_stops_on_sigterm(tmp_path):
    port = _free_port()
    log_path = tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "dgjax.serve", "--host", "127.0.0.1", "--port", str(port),
           "--served-model-name", "cli-model", "--api-key", "cli-key", "--dtype", "float32",
           "--max-model-len", "512", "--max-concurrency", "4", "--page-size", "16",
           "--num-pages", "160", "--decode-buckets", "4", "--prefill-buckets", "64,256",
           "--no-prefix-cache", "--lazy-structured-compile", "--max-body-bytes", "1k",
           "--shutdown-timeout", "5"]
    # the same buckets as the in-process servers: executables come from the compilation cache
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, log_path.read_text()
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
        auth = {"Authorization": "Bearer cli-key"}
        models = httpx.get(url + "/v1/models", headers=auth).json()
        assert models["data"][0]["id"] == "cli-model"
        assert httpx.get(url + "/v1/models").status_code == 401
        r = httpx.post(url + "/v1/completions", headers=auth, timeout=60,
                       json={"model": "tiny-chat", "prompt": "The", "max_tokens": 3})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] >= 1
        assert httpx.post(url + "/v1/completions", headers=auth,
                          json={"prompt": "x" * 2000}).status_code == 413
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    log = log_path.read_text()
    # uvicorn re-raises the signal it caught once shutdown is complete, so it may die "by" SIGTERM
    assert rc in (0, -signal.SIGTERM), log
    assert "Application shutdown complete" in log
    assert "serving model 'cli-model'" in log and f"http://127.0.0.1:{port}" in log
    assert "decode buckets [4]" in log and "prefill buckets [64, 256]" in log
    assert "Uvicorn running" in log
