"""Plain Python ``range`` loops in a kernel: traced once as ``sequential_range`` where that gives
the same kernel as unrolling, unrolled otherwise. ``nl.affine_range``/``nl.sequential_range``
loops are rewritten too, keeping their kind and their traced-once meaning for names: they unroll
only for Python effects in the body or a ``NonAffineIndexError`` (a body that needs concrete ints,
such as ``tiles[k]``), since beta 2's reference defines them as ``range``, unrolled.

The NKI reference says a plain ``range`` means ``sequential_range``. Unrolling it at trace time is
always correct but makes an N-copy IR and an N-times slower trace, so before a kernel is traced
its source is rewritten (``traceable``): every ``for <name> in range(...)`` statement becomes
code that first traces the body once with a symbolic loop variable inside an IR loop of kind
``sequential`` and, when that can not give the unrolled result, rolls the trace back and runs the
original loop over concrete ints. Why a loop was unrolled is logged at debug level on this
module's logger.

A loop is unrolled without trying (decided from its source) when its body has ``break``,
``continue``, ``return``, ``yield``, ``try``, ``del``, ``global``/``nonlocal``, an attribute
assignment or a call of a list/dict/set mutator (``xs.append(t)``...): Python side effects that
would happen once instead of N times. It is unrolled after trying when

* the body needs a concrete int (``if i == 0``, ``tiles[i]``, ``nl.ndarray((i, 4))``): any
  exception while tracing the symbolic body rolls back and unrolls (a real error then surfaces
  from the unrolled loop, with concrete values);
* a name read before it is assigned in the body (carried from one iteration to the next, like
  ``acc = acc + x``) is unbound before the loop or is not an on-chip tile, or its new value is
  not an on-chip tile of the same shape and dtype;
* a name assigned in the body and read outside the loop ends up holding an index expression or
  view of the loop variable.

A carried tile that the body updates in place (``acc += x``) needs nothing. One the body rebinds
(``acc = acc + x``) is traced again with the name bound to a fresh copy made before the loop;
the end of the body copies the new value into it, so the next iteration reads it, exactly as
the unrolled code reads the previous iteration's tile (and the tile the name had before the loop
keeps its value, as in unrolled code).
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import inspect
import logging
import textwrap
from typing import Any, Callable

from emulator.kernel_ir import divmod as dm

from . import boolops
from .errors import NonAffineIndexError
from .indexing import Idx, Pred
from .lang.spmd import affine_range, sequential_range
from .tile import Tile
from .tracer import current_or_none, user_location

log = logging.getLogger(__name__)

_RUNTIME = "_nki_plain_range"
_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update", "add",
                       "discard", "setdefault", "popitem", "sort", "reverse"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)


# --- the source rewrite -------------------------------------------------------------------------

def traceable(func: Callable) -> Callable:
    """``func`` with its ``for ... in range(...)`` statements (see module docstring) and its
    ``and`` / ``or`` expressions (boolops.py) rewritten, memoised on the function; ``func``
    itself when its source is unavailable or has neither."""
    cached = getattr(func, "__nki_traceable__", None)
    if cached is not None:
        return cached
    try:
        new = _rewrite(func)
    except (OSError, TypeError, SyntaxError, ValueError, NameError) as e:
        log.debug("%s: plain range loops unroll (source not rewritten: %s)",
                  getattr(func, "__name__", func), e)
        new = func
    try:
        func.__nki_traceable__ = new
    except (AttributeError, TypeError):
        pass
    return new


def _rewrite(func: Callable) -> Callable:
    code = func.__code__
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef) or fdef.name != code.co_name:
        return func
    fdef.decorator_list = []
    rewriter = _Rewriter(fdef, code.co_firstlineno - 1)
    rewriter.visit(fdef)
    if not rewriter.count:
        return func
    ast.increment_lineno(tree, code.co_firstlineno - 1)
    free = list(code.co_freevars)
    factory = ast.FunctionDef(
        name="_nki_factory",
        args=ast.arguments(posonlyargs=[],
                           args=[ast.arg(n) for n in free + [_RUNTIME, boolops.RUNTIME]],
                           kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=[fdef, ast.Return(ast.Name(fdef.name, ast.Load()))], decorator_list=[])
    module = ast.Module([factory], type_ignores=[])
    ast.fix_missing_locations(module)
    namespace: dict[str, Any] = {}
    exec(compile(module, code.co_filename, "exec"), func.__globals__, namespace)
    cells = [c.cell_contents for c in (func.__closure__ or ())]
    new = namespace["_nki_factory"](*cells, PlainRange, boolops.Helpers)
    new.__defaults__ = func.__defaults__
    new.__kwdefaults__ = func.__kwdefaults__
    functools.update_wrapper(new, func, updated=())
    return new


def _names(node: ast.AST, ctx: type) -> set[str]:
    """Names used with ``ctx`` (Load or Store) in ``node``, not looking into inner scopes."""
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Name) and isinstance(n.ctx, ctx):
            out.add(n.id)
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and ctx is ast.Load:
            out.add(n.target.id)
        for child in ast.iter_child_nodes(n):
            if not isinstance(child, _SCOPES):
                stack.append(child)
            elif ctx is ast.Load:  # an inner scope may read our names (closures, comprehensions)
                out |= {m.id for m in ast.walk(child)
                        if isinstance(m, ast.Name) and isinstance(m.ctx, ast.Load)}
    return out


def _read_before_write(body: list[ast.stmt], defined: set[str]) -> tuple[set[str], set[str]]:
    """(names possibly read before they are assigned, names definitely assigned) over ``body``
    run once from a state where ``defined`` are assigned."""
    defined = set(defined)
    early: set[str] = set()
    for st in body:
        if isinstance(st, ast.If):
            early |= _names(st.test, ast.Load) - defined
            e1, d1 = _read_before_write(st.body, defined)
            e2, d2 = _read_before_write(st.orelse, defined)
            early |= e1 | e2
            defined |= d1 & d2
        elif isinstance(st, (ast.For, ast.While)):
            head = st.iter if isinstance(st, ast.For) else st.test
            early |= _names(head, ast.Load) - defined
            inner = defined | (_names(st.target, ast.Store) if isinstance(st, ast.For) else set())
            e1, _ = _read_before_write(st.body + st.orelse, inner)
            early |= e1
        elif isinstance(st, ast.With):
            for item in st.items:
                early |= _names(item.context_expr, ast.Load) - defined
                if item.optional_vars is not None:
                    defined |= _names(item.optional_vars, ast.Store)
            e1, d1 = _read_before_write(st.body, defined)
            early |= e1
            defined |= d1
        else:
            early |= _names(st, ast.Load) - defined
            if not isinstance(st, (ast.Try, ast.Match)):
                defined |= _names(st, ast.Store)
    return early, defined


def _refusal(loop: ast.For, line_offset: int, local_names: set[str]) -> str | None:
    """Why the loop must unroll whatever the values (Python effects per iteration), or None.
    A mutator method counts when called on a name of the kernel function (``parts.append``), not
    on a module it imports (``nl.add`` is an instruction, not ``set.add``)."""
    if loop.orelse:
        return "it has an else clause"
    stack: list[tuple[ast.AST, bool]] = [(s, True) for s in loop.body]
    while stack:
        n, top = stack.pop()
        if isinstance(n, (ast.Break, ast.Continue)) and top:
            return f"its body has '{type(n).__name__.lower()}'"
        if isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom, ast.Await, ast.Try, ast.Delete,
                          ast.Global, ast.Nonlocal)):
            return f"its body has '{type(n).__name__.lower()}' (line {n.lineno + line_offset})"
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(isinstance(m, ast.Attribute) and isinstance(m.ctx, ast.Store)
                   for t in targets for m in ast.walk(t)):
                return f"its body assigns an attribute (line {n.lineno + line_offset})"
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in _MUTATORS and _receiver(n.func) in local_names:
            return (f"its body calls .{n.func.attr}() (line {n.lineno + line_offset}): "
                    "a Python side effect")
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        inner = top and not isinstance(n, (ast.For, ast.While))
        stack.extend((c, inner) for c in ast.iter_child_nodes(n))
    return None


#: Loop functions whose ``for`` statements are rewritten: ``range`` and, by name (checked again at
#: run time: ``PlainRange`` unrolls any other callable), ``affine_range`` / ``sequential_range``,
#: which beta 2's reference defines as aliases of ``range``, fully unrolled.
_LOOP_NAMES = frozenset({"range", "affine_range", "sequential_range"})


def _loop_function(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in _LOOP_NAMES
    return isinstance(func, ast.Attribute) and func.attr in _LOOP_NAMES - {"range"}


def _receiver(func: ast.Attribute) -> str | None:
    """The name a method call starts from (``a`` of ``a.b[0].append``), or None."""
    node: ast.expr = func.value
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _local_names(fdef: ast.FunctionDef) -> set[str]:
    """Names the kernel function binds: its parameters and every name it assigns."""
    a = fdef.args
    params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    return params | {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name)
                     and isinstance(n.ctx, ast.Store)}


class _Rewriter(ast.NodeTransformer):
    """Rewrites ``for <name> in range(...)`` statements, and ``nl.affine_range`` /
    ``nl.sequential_range`` ones (innermost first); ``and`` / ``or`` go to boolops.py."""

    def __init__(self, fdef: ast.FunctionDef, line_offset: int):
        self.fdef = fdef
        self.line_offset = line_offset
        self.count = 0
        self.local_names = _local_names(fdef)

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        """``and`` / ``or``: through boolops' helpers, so that ``mask_a and mask_b`` is both."""
        self.generic_visit(node)
        new = boolops.rewrite(node)
        if new is not node:
            self.count += 1
        return new

    def visit_For(self, node: ast.For) -> Any:
        it = node.iter
        if not (isinstance(node.target, ast.Name) and isinstance(it, ast.Call)
                and _loop_function(it.func) and not it.keywords
                and 1 <= len(it.args) <= 3
                and not any(isinstance(a, ast.Starred) for a in it.args)):
            self.generic_visit(node)
            return node
        # Analysed as the user wrote it, before inner loops are rewritten.
        original = node
        assigned = _names(ast.Module(node.body, []), ast.Store) - {node.target.id}
        early, _ = _read_before_write(node.body, {node.target.id})
        carried = sorted(early & assigned)
        inside = {id(n) for n in ast.walk(node)}
        outside = {n.id for n in ast.walk(self.fdef) if isinstance(n, ast.Name)
                   and isinstance(n.ctx, ast.Load) and id(n) not in inside}
        escaping = sorted((assigned | {node.target.id}) & outside)
        if not isinstance(it.func, ast.Name) or it.func.id != "range":
            # nl.affine_range / sequential_range keep their traced-once meaning for names; they
            # unroll only for Python effects (below) or a body that needs concrete ints
            carried, escaping = [], []
        refusal = _refusal(node, self.line_offset, self.local_names)
        self.generic_visit(node)
        self.count += 1
        k = self.count
        var = f"_nki_loop{k}"

        def load(name: str) -> ast.expr:
            return ast.Name(name, ast.Load())

        def attr(name: str) -> ast.expr:
            return ast.Attribute(load(var), name, ast.Load())

        def call(name: str, *args: ast.expr) -> ast.expr:
            return ast.Call(attr(name), list(args), [])

        def const(v: Any) -> ast.expr:
            return ast.Constant(v)

        def names_tuple(names: list[str], ctx) -> ast.expr:
            return ast.Tuple([ast.Name(n, ctx()) for n in names], ctx())

        locals_call = ast.Call(load("locals"), [], [])
        make = ast.Assign([ast.Name(var, ast.Store())], ast.Call(load(_RUNTIME), [
            it.func, ast.Tuple(list(it.args), ast.Load()),
            ast.Tuple([const(n) for n in carried], ast.Load()),
            ast.Tuple([const(n) for n in escaping], ast.Load()), const(refusal)], []))
        sym_body: list[ast.stmt] = []
        if carried:
            sym_body.append(ast.Assign([names_tuple(carried, ast.Store)], attr("carried_values")))
        sym_body += copy.deepcopy(node.body)
        sym_body.append(ast.Expr(call("carry", locals_call)))
        handler = ast.ExceptHandler(
            ast.Name("Exception", ast.Load()), f"_nki_e{k}",
            [ast.If(ast.UnaryOp(ast.Not(), call("recover", load(f"_nki_e{k}"))),
                    [ast.Raise()], [])])
        attempt = ast.While(call("attempt", ast.Call(load("locals"), [], [])), [ast.Try(
            [ast.For(ast.Name(node.target.id, ast.Store()), load(var), sym_body, [])],
            [handler], [], [])], [])
        unroll_body: list[ast.stmt] = []
        if carried:
            unroll_body.append(ast.If(
                ast.Compare(attr("entry"), [ast.IsNot()], [const(None)]),
                [ast.Assign([names_tuple(carried, ast.Store)], attr("entry"))], []))
        unroll_body.append(ast.For(ast.Name(node.target.id, ast.Store()), call("values"),
                                   node.body, []))
        out = [make, attempt, ast.If(attr("unrolled"), unroll_body, [])]
        for st in out:
            ast.copy_location(st, original)
            for n in ast.walk(st):
                if not hasattr(n, "lineno"):
                    ast.copy_location(n, original)
        return out




# --- the run-time object ------------------------------------------------------------------------

#: The IR loop a rewritten loop traces as, by its loop function (``range`` is sequential, as the
#: reference says; ``affine_range`` keeps its independent iterations).
_KINDS: dict[Callable, str] = {builtins.range: "sequential", affine_range: "affine",
                               sequential_range: "sequential"}

class PlainRange:
    """One rewritten ``for name in range(...)`` statement at run time (see module docstring).
    The generated code calls ``attempt`` until it says no, iterating the object (one symbolic
    iteration) each time, then ``values()`` when ``unrolled``."""

    def __init__(self, rng: Callable, args: tuple, carried: tuple[str, ...],
                 escaping: tuple[str, ...], refusal: str | None):
        self.kind = _KINDS.get(rng) if rng is builtins.range or rng in _KINDS else None
        self.rng = rng
        # affine_range/sequential_range take range's positional arguments
        self.args = args if rng is builtins.range or self.kind is None else \
            tuple(int(a) for a in args)
        self.carried = carried
        self.escaping = escaping
        self.trace = current_or_none()
        self.loc = user_location()
        self.unrolled = False
        self.entry: tuple | None = None
        self.passes = 0
        self.rebound: set[str] = set()
        self._bound: dict[str, Tile] = {}
        self._snap = None  # a builder checkpoint while the symbolic body traces
        self._first_loop = 0
        self._range: range | None = None
        if self.trace is None or self.kind is None:
            self.unrolled = True
        elif refusal:
            self._unroll(refusal)
        else:
            self._range = range(*args)
            if len(self._range) < 2:
                self.unrolled = True

    def _unroll(self, why: str) -> None:
        if self._snap is not None:
            self.trace.rollback(self._snap)
            self._snap = None
        self.unrolled = True
        tr = self.trace
        log.debug("kernel %r: range loop at %s is unrolled: %s",
                  tr.name if tr is not None else "?", self.loc, why)

    def values(self):
        if self.kind is not None:  # concrete ints, whatever the loop function
            return iter(range(*self.args))
        return iter(self.rng(*self.args))

    # --- the symbolic pass ----------------------------------------------------------------------

    def attempt(self, scope: dict[str, Any]) -> bool:
        """True when the body is to be traced (once more) with a symbolic variable."""
        if self.unrolled or self.passes >= 2 or (self.passes == 1 and not self.rebound):
            return False
        tr = self.trace
        if self.passes == 0:
            missing = [n for n in self.carried if n not in scope]
            if missing:
                self._unroll(f"{missing[0]!r} is read before it is assigned in the body and is "
                             "not bound before the loop")
                return False
            self.entry = tuple(scope[n] for n in self.carried)
            for n, v in zip(self.carried, self.entry):
                if not (isinstance(v, Tile) and v.on_chip and not v.cast):
                    self._unroll(f"{n!r} carries a value from one iteration to the next that is "
                                 f"not an on-chip tile ({type(v).__name__})")
                    return False
        self.passes += 1
        self._snap = tr.checkpoint()
        self._first_loop = tr.loop_count + 1
        self._bound = dict(zip(self.carried, self.entry or ()))
        for n in sorted(self.rebound):
            e = self._bound[n]
            self._bound[n] = tr.new("tensor_copy", e.shape, e.dtype_name, e,
                                    memory=e.decl.memory)
        return True

    def __iter__(self):
        r = self._range
        assert r is not None
        return self.trace.loop(len(r), self.kind, r.start, r.step)

    @property
    def carried_values(self) -> tuple:
        return tuple(self._bound[n] for n in self.carried)

    def carry(self, scope: dict[str, Any]) -> None:
        """End of the symbolic body: check what it left in the Python names; copy rebound
        carried tiles back for the next iteration (second pass), or ask for a second pass, or
        roll back and unroll."""
        if self._snap is None:
            return
        tr = self.trace
        syms = {f"l{i}" for i in range(self._first_loop, tr.loop_count + 1)}
        for n in self.escaping:
            if n in scope and _mentions(scope[n], syms):
                self._unroll(f"{n!r} is read outside the loop and holds an index of its variable")
                return
        copies = []
        for n in self.carried:
            e, v = self._bound[n], scope.get(n)
            if v is e or (isinstance(v, Tile) and v.decl is e.decl and v.access() == e.access()):
                continue
            if not (isinstance(v, Tile) and v.on_chip and not v.cast and v.shape == e.shape
                    and v.dtype_name == e.dtype_name):
                self._unroll(f"{n!r} is carried from one iteration to the next, but its new "
                             f"value {v!r} is not an on-chip tile like {e!r}")
                return
            copies.append((e, v))
        if copies and self.passes == 1:
            self.rebound = {n for n in self.carried if scope.get(n) is not self._bound[n]}
            tr.rollback(self._snap)
            self._snap = None
            return
        for e, v in copies:
            tr.emit("tensor_copy", e, v)
        self._snap = None

    def recover(self, exc: BaseException) -> bool:
        """An exception in the symbolic body: roll back and unroll (True), or let it propagate
        (False) when it did not come from the symbolic pass."""
        if self._snap is None:
            return False
        if self.rng is not builtins.range and not isinstance(exc, NonAffineIndexError):
            # nl.affine_range/sequential_range: only a body that needs concrete ints unrolls; a
            # genuine error is reported from the symbolic pass, over the whole range, as before
            self.trace.rollback(self._snap)
            self._snap = None
            return False
        self._unroll(f"the body needs concrete values ({type(exc).__name__}: {exc})")
        return True


def _mentions(value: Any, syms: set[str], depth: int = 0) -> bool:
    """Whether ``value`` (an index, mask, tile view, or a tuple/list of them) uses ``syms``."""
    if isinstance(value, Idx):
        return any(dm.base_of(s) in syms for s in value.terms)
    if isinstance(value, Pred):
        return any(_mentions(e, syms) for e in value.exprs)
    if isinstance(value, Tile):
        return any(dm.base_of(s) in syms for a in value.index for s, _ in a.terms)
    if isinstance(value, (tuple, list)) and depth < 2:
        return any(_mentions(v, syms, depth + 1) for v in value)
    if isinstance(value, slice):
        return any(_mentions(v, syms, depth + 1) for v in (value.start, value.stop))
    return False


__all__ = ["traceable", "PlainRange"]
