"""Suite-wide setup: one fresh JAX compilation cache per test session, shared by every engine."""

from __future__ import annotations

import os
import tempfile

import pytest

_CACHE = tempfile.mkdtemp(prefix="dgjax-test-xla-")
os.environ.setdefault("DGJAX_CACHE_DIR", _CACHE)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_CHAT = os.path.join(REPO, "checkpoints", "tiny-chat")


@pytest.fixture(scope="session")
def tiny_chat_dir() -> str:
    return TINY_CHAT
