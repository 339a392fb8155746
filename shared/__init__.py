"""Code both Phalanx processes import: the public names, quantities, group links, config, logging.

Nothing here does I/O (an import-linter contract in pyproject.toml enforces it).
"""
