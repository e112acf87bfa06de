"""latentcode: attention as a hypernetwork, made inspectable."""

from latentcode._version import __version__

__all__ = ["__version__"]
