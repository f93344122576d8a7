"""The installed distribution's version, for ``monkfw --version`` and ``monk_framework.__version__``."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("monk-framework")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
