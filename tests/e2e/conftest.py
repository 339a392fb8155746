import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Everything under tests/e2e needs the real local control plane.
    for item in items:
        if "/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
