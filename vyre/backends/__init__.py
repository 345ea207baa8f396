"""Namespace for vyre.backends (installed from the repo's backends/ folder)."""
