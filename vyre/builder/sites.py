"""Where in the user's source a kernel is being written: the error kernels raise
(BuildError, naming the user's line), the user's "file:line" and the name a line binds.

Frames of vyre's own builder and kernel modules are skipped, so a site is always the
user's line. This module must never build IR.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import re
import sys
from typing import Any

from ..errors import InvalidProgram


class BuildError(InvalidProgram):
    """A kernel was written wrongly (raised while building, before any backend sees it).

    `site` is the user's source line ("file.py:12") where it is known.
    """

    def __init__(self, message: str, site: str | None = None) -> None:
        self.site = site if site is not None else user_site()
        self.detail = message
        super().__init__(message if self.site is None else f"{self.site}: {message}")


# Frames in these files are vyre's own; a "site" is the first frame outside them, i.e. the
# line of the user's kernel (or program factory) that made the node: every module of this
# package, the kernel decorator's and vyre.shapes (each path as imported and absolute).
_PACKAGE_DIRS = {os.path.dirname(__file__), os.path.dirname(os.path.abspath(__file__))}
_KERNEL_FILES = ("kernel.py", "kernel_lang.py", "kernel_signature.py", "kernel_flow.py",
                 "kernel_expr.py", "kernel_ast.py", "shapes.py")
_INTERNAL_FILES = frozenset({
    str(contextlib.__file__),
    *(os.path.join(d, f) for d in _PACKAGE_DIRS for f in os.listdir(d or ".")
      if f.endswith(".py")),
    *(os.path.join(os.path.dirname(d), f) for d in _PACKAGE_DIRS for f in _KERNEL_FILES),
})


def _user_frame() -> Any:
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename in _INTERNAL_FILES:
        f = f.f_back  # type: ignore[assignment]
    return f


def user_site() -> str | None:
    """"file.py:LINE" of the user code currently building a node, or None."""
    f = _user_frame()
    return None if f is None else f"{f.f_code.co_filename}:{f.f_lineno}"


_ASSIGNED = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=]*)?=(?!=)")
_WITH_AS = re.compile(r".*\bas\s+([A-Za-z_][A-Za-z0-9_]*)\s*:")
_IR_PATH = re.compile(r"body(?:\[\d+\](?:\.(?:then|orelse|body)\[\d+\])*)(?:\.[a-z_]+)*")
_FOR_IN = re.compile(r"\s*for\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\b")


def user_name(pattern: re.Pattern[str] = _ASSIGNED) -> str | None:
    """The Python name the user's current line binds (`acc = k.let(0)` -> "acc"), or None.

    Only used to give IR locals the user's names, so generated code and error messages
    read like the source; a line that does not match keeps a generated name.
    """
    f = _user_frame()
    if f is None:
        return None
    m = pattern.match(linecache.getline(f.f_code.co_filename, f.f_lineno))
    return m.group(1) if m else None


def _user_line() -> str:
    """The stripped source line of the user code building a node ("" if unknown)."""
    f = _user_frame()
    return "" if f is None else linecache.getline(f.f_code.co_filename, f.f_lineno).strip()


def _no_host_print(what: str) -> BuildError:
    return BuildError(
        f"{what} cannot be printed or formatted by Python: the kernel is only being built, "
        "so this would show a placeholder, not a value. Print on the device with "
        "vyre.print(\"x = {}\", x) (k.print(...) with the builder): each invocation's "
        "output is printed after the dispatch, in invocation order; repr(v) shows what the "
        "placeholder is", user_site())
