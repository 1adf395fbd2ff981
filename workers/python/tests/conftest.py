# Shared pytest fixtures: where the repository's fixtures live (the package sits at workers/python).
# Not tests.
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope='session')
def repo_root() -> Path:
    return REPO_ROOT
