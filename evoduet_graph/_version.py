"""The package version, in a module of its own so that any module can name it."""

__version__ = "0.1.0"
