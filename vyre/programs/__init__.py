"""Namespace for vyre.programs (installed from the repo's programs/ folder)."""
