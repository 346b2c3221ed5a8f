"""Fixtures for the dense-family parity tests (one tiny HF model per case, built once per module)."""

from __future__ import annotations

import pytest
from dense_cases import CASES, DenseCase, build_case


@pytest.fixture(scope="module", params=sorted(CASES))
def dense_case(request, tmp_path_factory) -> DenseCase:
    return build_case(request.param, tmp_path_factory.mktemp(request.param))
