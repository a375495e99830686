"""Kernel IR as readable text, for debugging and dumps (not a serialisation: use ``to_bytes``).

::

    kernel tensor_add grid=[2, 2]  (k.py)
      a: hbm float32[256, 1024] input
      t1: sbuf float32[128, 512]
      ...
      t1[t0, t1] = load a[128*p0 + t0, 512*p1 + t1]                      # k.py:9
      for l1 in affine_range(4):                                          # k.py:12
        acc[t0, t1] += tensor_copy t3[t0, t1]
"""

from __future__ import annotations

from .control import describe
from .ir import Access, Const, Instruction, KernelIR, Loop, Statement


def format_kernel(kernel: KernelIR) -> str:
    lines = [f"kernel {kernel.name} grid={list(kernel.grid)}  ({kernel.source})"]
    for t in kernel.tensors.values():
        extra = "" if t.role == "internal" else f" {t.role}"
        lines.append(f"  {t.name}: {t.memory} {t.dtype}{list(t.shape)}{extra}")
    _body(kernel.body, 1, lines)
    return "\n".join(lines) + "\n"


def format_operand(o: Access | Const) -> str:
    """An operand as the kernel text prints it: ``t3[t0, t1]`` or a constant's repr."""
    if isinstance(o, Const):
        return repr(o.value)
    return f"{o.tensor}[{', '.join(str(a) for a in o.index)}]"


def format_instruction(ins: Instruction) -> str:
    """One instruction as a line of ``format_kernel``'s text, without its source location."""
    attrs = " ".join(f"{k}={v}" for k, v in sorted(ins.attrs.items()))
    srcs = ", ".join(format_operand(s) for s in ins.srcs)
    rhs = " ".join(p for p in (ins.op, attrs, srcs) if p)
    if ins.dst is None:
        text = rhs
    else:
        text = f"{format_operand(ins.dst)} {'=' if ins.acc is None else ins.acc + '='} {rhs}"
    if ins.mask:
        text += f"  mask({' & '.join(f'{m} >= 0' for m in ins.mask)})"
    return text


def _body(body: list[Statement], depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    for st in body:
        if isinstance(st, Loop):
            lines.append(_with_loc(f"{pad}{describe(st)}:", st.loc))
            _body(st.body, depth + 1, lines)
        else:
            lines.append(_with_loc(pad + format_instruction(st), st.loc))


def _with_loc(text: str, loc) -> str:
    if loc is None:
        return text
    return f"{text:<70s}  # {loc.file.rsplit('/', 1)[-1]}:{loc.line}"
