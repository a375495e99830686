"""The error shape shared by kernel tracing and kernel execution: every message names the kernel,
the source file:line in the kernel, and the rule that was broken."""

from __future__ import annotations

from .ir import SourceLoc


class KernelError(Exception):
    """``kernel 'name' at file:line: rule: detail``."""

    def __init__(self, kernel: str, loc: SourceLoc | None, rule: str, detail: str):
        self.kernel = kernel
        self.loc = loc
        self.rule = rule
        self.detail = detail
        where = f" at {loc}" if loc is not None else ""
        super().__init__(f"kernel {kernel!r}{where}: {rule}: {detail}")
