"""Session-wide servers for the serving tests (compile time is paid once per session)."""

from __future__ import annotations

import os

import pytest

from serving_harness import API_KEY, MODEL_DIR, RunningServer, engine_config


@pytest.fixture(scope="session")
def server():
    """The main server: prefix cache on, API key required, 4 decode slots."""
    assert os.path.isfile(os.path.join(MODEL_DIR, "config.json")), f"no model at {MODEL_DIR}"
    s = RunningServer(engine_config(), api_key=API_KEY)
    yield s
    s.stop()


@pytest.fixture
def http(server):
    with server.client() as c:
        yield c


@pytest.fixture(scope="session")
def hf_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(MODEL_DIR)


@pytest.fixture(scope="session")
def agent_server(tmp_path_factory):
    """Qwen3 chat template, small file limits, fast keep-alives, one decode slot
    (tests/serving/agent_server.py)."""
    from agent_server import start_agent_server

    s = start_agent_server(str(tmp_path_factory.mktemp("agent-model")))
    yield s
    s.stop()


@pytest.fixture
def agent_http(agent_server):
    with agent_server.client() as c:
        yield c
