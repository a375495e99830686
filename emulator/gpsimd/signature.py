"""Checks a compute function's parameter types (from its demangled symbol) against the
argument kinds its shape function registered, with the signature rules' wording."""

from __future__ import annotations

from emulator.gpsimd.errors import LibraryError

# Demangled parameter type -> argument kind (by value, reference and const reference alike).
_KINDS = {
    "torch::Tensor": "tensor",
    "torch::Tensor const": "tensor",
    "torch::Tensor&": "tensor",
    "torch::Tensor const&": "tensor",
    "torch::Scalar": "scalar",
    "torch::Scalar const": "scalar",
    "torch::Scalar&": "scalar",
    "torch::Scalar const&": "scalar",
    "double": "double",
    "double const": "double",
    "long": "int64",
    "long const": "int64",
}

_ADVICE = {
    "float": "float arguments are not supported, use double",
    "int": "int arguments are not supported, use int64_t",
}


def parameters(demangled: str) -> list[str]:
    """Splits the parameter list of a demangled function name at top-level commas."""
    start, end = demangled.find("("), demangled.rfind(")")
    inner = demangled[start + 1 : end].strip()
    if not inner or inner == "void":
        return []
    params, depth, current = [], 0, ""
    for ch in inner:
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            params.append(current.strip())
            current = ""
        else:
            current += ch
    params.append(current.strip())
    return params


def check(where: str, demangled: str, kinds: tuple[str, ...]) -> None:
    """Raises LibraryError when the compute function cannot take the shape function's arguments."""
    params = parameters(demangled)
    for k, param in enumerate(params):
        if param not in _KINDS:
            rule = next((v for key, v in _ADVICE.items() if param.startswith(key)), None)
            if rule is None and param.startswith("std::vector"):
                rule = "std::vector arguments are not supported"
            if rule is None and param.startswith("std::tuple"):
                rule = "std::tuple arguments are not supported"
            rule = rule or "arguments must be torch::Tensor, torch::Scalar, double or int64_t"
            raise LibraryError(
                f"{where}: compute function {demangled}: argument {k} has type {param}; "
                f"signature rule: {rule}"
            )
    found = tuple(_KINDS[p] for p in params)
    if found != kinds:
        raise LibraryError(
            f"{where}: compute function {demangled} takes ({', '.join(found)}) but its shape "
            f"function takes ({', '.join(kinds)}); they must have the same signature"
        )
