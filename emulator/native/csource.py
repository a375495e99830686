"""The C++ source of a module of fused regions (a CPython extension module, one function each).

Why an extension module and not ctypes: a region replaces a few NumPy calls of about a
microsecond each; ctypes spends about that much converting arguments (an array's data pointer
alone costs ~0.5 us from Python). A METH_FASTCALL function reads the arrays' pointers directly
and allocates its results with NumPy's C API: ~0.1-0.2 us a call.

Each function `r<j>(fallback, leaf0, leaf1, ...)` checks every input against what it was compiled
for (exact ndarray, dtype and shape; a NumPy scalar for a rank-0 input; an array in another
layout is read from a C-ordered copy) and, if any differs, returns `fallback(leaf0, ...)`: the
region's NumPy form. Otherwise it allocates fresh
outputs and runs one loop nest over the region's shape, each node a local scalar.

Only numbers from the program enter the source (shapes, strides, type numbers, constants as bit
patterns) and identifiers generated here; nothing of the artifact's text.
"""
from __future__ import annotations

import numpy as np

from emulator.native.cexpr import ctype, expression
from emulator.native.regions import READS, Leaf, Node, Region

_PRELUDE = """\
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <cmath>
#include <cstdint>
#include <cstring>

static inline float ncc_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline double ncc_f64(uint64_t u) { double f; std::memcpy(&f, &u, 8); return f; }

/* The data of `o` if it is what the region was compiled for, else NULL (the caller falls back).
   A NumPy scalar stands for a rank-0 array: its value is copied into `buf`. An array of the
   right type and shape in another layout (a transposed or broadcast view) is read from a
   C-ordered copy, which `*hold` keeps until the caller releases it. */
static const void *ncc_take(PyObject *o, int typenum, int ndim, const npy_intp *dims, void *buf, PyObject **hold) {
    if (PyArray_CheckExact(o)) {
        PyArrayObject *a = (PyArrayObject *)o;
        if (PyArray_TYPE(a) != typenum || PyArray_NDIM(a) != ndim) return NULL;
        for (int d = 0; d < ndim; d++)
            if (PyArray_DIM(a, d) != dims[d]) return NULL;
        if (!PyArray_IS_C_CONTIGUOUS(a)) {
            *hold = PyArray_NewCopy(a, NPY_CORDER);
            if (*hold == NULL) { PyErr_Clear(); return NULL; }
            return PyArray_DATA((PyArrayObject *)*hold);
        }
        return PyArray_DATA(a);
    }
    if (ndim == 0 && PyArray_IsScalar(o, Generic)) {
        PyArray_Descr *descr = PyArray_DescrFromScalar(o);
        if (descr == NULL) { PyErr_Clear(); return NULL; }
        int same = descr->type_num == typenum;
        Py_DECREF(descr);
        if (!same) return NULL;
        PyArray_ScalarAsCtype(o, buf);
        return buf;
    }
    return NULL;
}

static PyObject *ncc_fallback(PyObject *const *args, Py_ssize_t nargs) {
    return PyObject_Vectorcall(args[0], args + 1, (size_t)(nargs - 1), NULL);
}
"""


def _literal(leaf: Leaf) -> str:
    """The C constant of a leaf's single element, from its bits (NaN payloads and -0 kept)."""
    value = np.asarray(leaf.literal, dtype=leaf.dtype)
    if leaf.dtype == np.float32:
        return f"ncc_f32({int(value.view(np.uint32))}u)"
    if leaf.dtype == np.float64:
        return f"ncc_f64({int(value.view(np.uint64))}ull)"
    if leaf.dtype == np.bool_:
        return f"(({ctype(leaf.dtype)}){int(bool(value))})"
    number = int(value)
    if number < 0:
        return f"(({ctype(leaf.dtype)})(-{-number - 1}LL - 1))"
    return f"(({ctype(leaf.dtype)}){number}ULL)"


def _index(strides: tuple[int, ...], rank: int) -> str:
    terms = [f"i{d} * {s}" if s != 1 else f"i{d}" for d, s in zip(range(rank), strides) if s != 0]
    return " + ".join(terms) or "0"


def _node_line(k: int, node: Node, region: Region, rank: int) -> str:
    t = ctype(node.dtype)
    if node.refs and node.refs[0][0] == "node" and node.op in READS:
        return f"const {t} v{k} = v{node.refs[0][1]};"
    args = []
    for kind, j in node.refs:
        if kind == "node":
            args.append(f"v{j}")
        elif region.leaves[j].literal is not None:
            args.append(_literal(region.leaves[j]))
        else:
            assert node.strides is not None
            args.append(f"x{j}[{_index(node.strides, rank)}]")
    if node.op in READS:
        return f"const {t} v{k} = {args[0]};"
    expr = expression(node.op, node.attrs, node.in_dtypes, node.dtype, args)
    if expr is None:  # the planner only admits nodes that have one
        raise ValueError(f"no C expression for {node.op} ({node.label})")
    return f"const {t} v{k} = {expr};"


def _function(j: int, region: Region) -> str:
    rank = len(region.shape)
    read = [i for i, leaf in enumerate(region.leaves) if leaf.literal is None]
    lines = [f"static PyObject *r{j}(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {{",
             f"    if (nargs != {len(region.leaves) + 1}) {{",
             '        PyErr_SetString(PyExc_TypeError, "a fused region got another number of inputs");',
             "        return NULL;", "    }",
             f"    PyObject *hold[{max(1, len(read))}] = {{NULL}};"]
    release = " ".join(f"Py_XDECREF(hold[{h}]);" for h in range(len(read)))
    for h, i in enumerate(read):
        leaf = region.leaves[i]
        dims = ", ".join(str(d) for d in leaf.shape) or "0"
        typenum = leaf.dtype.num
        lines += [f"    static const npy_intp d{i}[] = {{{dims}}};",
                  f"    alignas(16) unsigned char b{i}[16];",
                  f"    const {ctype(leaf.dtype)} *x{i} = (const {ctype(leaf.dtype)} *)"
                  f"ncc_take(args[{i + 1}], {typenum}, {len(leaf.shape)}, d{i}, b{i}, &hold[{h}]);",
                  f"    if (x{i} == NULL) {{ {release} return ncc_fallback(args, nargs); }}"]
    dims = ", ".join(str(d) for d in region.shape)
    lines.append(f"    npy_intp shape[] = {{{dims}}};")
    for o, k in enumerate(region.outputs):
        node = region.nodes[k]
        lines += [f"    PyObject *o{o} = PyArray_SimpleNew({rank}, shape, {node.dtype.num});",
                  f"    if (o{o} == NULL) {{ {' '.join(f'Py_DECREF(o{p});' for p in range(o))} {release} return NULL; }}",
                  f"    {ctype(node.dtype)} *w{o} = ({ctype(node.dtype)} *)PyArray_DATA((PyArrayObject *)o{o});"]
    lines.append("    npy_intp flat = 0;")
    indent = "    "
    for d, n in enumerate(region.shape):
        lines.append(f"{indent}for (npy_intp i{d} = 0; i{d} < {n}; i{d}++) {{")
        indent += "    "
    lines += [indent + _node_line(k, node, region, rank) for k, node in enumerate(region.nodes)]
    lines += [f"{indent}w{o}[flat] = v{k};" for o, k in enumerate(region.outputs)]
    lines.append(f"{indent}flat++;")
    for _ in region.shape:
        indent = indent[:-4]
        lines.append(f"{indent}}}")
    lines.append("    (void)flat;")
    if release:
        lines.append(f"    {release}")
    if len(region.outputs) == 1:
        lines.append("    return o0;")
    else:
        packed = ", ".join(f"o{o}" for o in range(len(region.outputs)))
        lines += [f"    PyObject *all = PyTuple_Pack({len(region.outputs)}, {packed});",
                  *(f"    Py_DECREF(o{o});" for o in range(len(region.outputs))),
                  "    return all;"]
    lines.append("}")
    return "\n".join(lines)


def module_source(name: str, regions: list[Region]) -> str:
    """The module `name` with function r<j> for regions[j]."""
    parts = [_PRELUDE]
    parts += [_function(j, r) for j, r in enumerate(regions)]
    methods = "\n".join(f'    {{"r{j}", (PyCFunction)(void (*)(void))r{j}, METH_FASTCALL, NULL}},'
                        for j in range(len(regions)))
    parts.append(f"static PyMethodDef methods[] = {{\n{methods}\n    {{NULL, NULL, 0, NULL}}\n}};")
    parts.append(f'static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, methods}};')
    parts.append(f"PyMODINIT_FUNC PyInit_{name}(void) {{\n    import_array();\n    return PyModule_Create(&module);\n}}")
    return "\n\n".join(parts) + "\n"
