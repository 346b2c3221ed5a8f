"""Fixtures for the text tests (helpers live in text_fixtures.py)."""

from __future__ import annotations

import os
import shutil

import pytest
from text_fixtures import TINY_CHAT_DIR, TOKENIZER_DIRS


@pytest.fixture(params=sorted(TOKENIZER_DIRS))
def tokenizer_dir(request) -> str:
    return TOKENIZER_DIRS[request.param]()


@pytest.fixture
def tiny_chat_copy(tmp_path) -> str:
    """A scratch copy of tiny-chat's tokenizer files, for tests that edit them."""
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json", "generation_config.json"):
        shutil.copy(os.path.join(TINY_CHAT_DIR, name), tmp_path / name)
    return str(tmp_path)
