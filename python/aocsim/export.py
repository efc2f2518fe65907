"""aocsim.torch.export: a PyTorch module as an aoc graph (docs/ir.md) and its weights, for the compiler.

``export(module, example_inputs, path)`` traces the module with torch.fx, maps each node to the
graph IR's ops and writes path (the graph JSON) and path with .h5 (its weights), as ``aoc import -o``
does; ``aocsim.load_graph(path)`` or the returned Graph compiles them for a machine. An AOCLayer
becomes a FixedPoint whose body is the layer's loop, z <- alpha z + tanh(z) (beta W) + x + b, with the
stop rule, tolerance, iteration cap and damping of the layer's Machine. A node the IR has no op for
raises aocsim.Error naming it.
"""

import functools
import json
import operator
import os
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from torch import fx, nn

import aocsim

SUPPORTED = ("nn.Linear and F.linear, aocsim.torch.AOCLayer, nn.Conv2d (no padding, dilation or groups), MaxPool2d and "
             "AvgPool2d (a window at its own stride), Tanh, ReLU, Sigmoid, SiLU, Softplus (beta 1, threshold >= 20), Exp, Neg, "
             "Softmax over the last axis, add/sub/mul, matmul by a matrix, Flatten/reshape/view that keep the leading "
             "(symbolic) axes, nn.Embedding, Identity, Dropout (inference: the identity)")

_UNARY_MODULES = {nn.Tanh: "Tanh", nn.ReLU: "Relu", nn.Sigmoid: "Sigmoid", nn.SiLU: "SiLU"}
_UNARY = {torch.tanh: "Tanh", F.tanh: "Tanh", torch.relu: "Relu", F.relu: "Relu", torch.sigmoid: "Sigmoid", F.sigmoid: "Sigmoid",
          F.silu: "SiLU", torch.exp: "Exp", torch.neg: "Neg", operator.neg: "Neg",
          "tanh": "Tanh", "relu": "Relu", "sigmoid": "Sigmoid", "exp": "Exp", "neg": "Neg"}
_BINARY = {operator.add: "Add", torch.add: "Add", "add": "Add", operator.sub: "Sub", torch.sub: "Sub", "sub": "Sub",
           operator.mul: "Mul", torch.mul: "Mul", "mul": "Mul"}
_MATMUL = {operator.matmul, torch.matmul, "matmul"}
_SOFTMAX = {F.softmax, torch.softmax, "softmax"}
_RESHAPE = {torch.flatten, torch.reshape, "flatten", "reshape", "view"}
_IDENTITY = {"contiguous"}
_PASS_MODULES = (nn.Identity, nn.Dropout)
# ops that keep an image's layout (elementwise)
_LAYOUT_KEEPING = {"Tanh", "Relu", "Sigmoid", "SiLU", "Exp", "Neg", "Softplus", "Add", "Sub", "Mul"}


def _aoc_layer():
    # imported here: aocsim.torch imports this module to expose export
    from .torch import AOCLayer
    return AOCLayer


class _Tracer(fx.Tracer):
    """torch.fx's tracer with AOCLayer kept whole: its forward is a solve, not tensor ops to trace."""

    def is_leaf_module(self, m, qualname):
        return isinstance(m, _aoc_layer()) or super().is_leaf_module(m, qualname)


class _Shapes(fx.Interpreter):
    """Runs the traced module on the example inputs, recording each node's result shape (None: not a tensor)
    and whether its result holds tensors at all (a tuple of them, as torch.sort gives)."""

    def __init__(self, gm):
        super().__init__(gm)
        self.shape, self.tensors = {}, {}

    def run_node(self, n):
        result = super().run_node(n)
        leaves = []
        fx.node.map_aggregate(result, leaves.append)
        self.shape[n] = tuple(result.shape) if isinstance(result, torch.Tensor) else None
        self.tensors[n] = any(isinstance(v, torch.Tensor) for v in leaves)
        return result


def _what(node, modules):
    """The node's op as a reader knows it: torch.nn.LayerNorm (module 'norm'), torch.sort, Tensor.sort."""
    if node.op == "call_module":
        m = modules[node.target]
        mod = "torch.nn" if type(m).__module__.startswith("torch.nn.modules") else type(m).__module__
        return f"{mod}.{type(m).__name__} (module '{node.target}')"
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    mod = getattr(node.target, "__module__", None) or ""
    mod = {"_operator": "operator", "torch._C._nn": "torch.nn.functional"}.get(mod, mod)
    return f"{mod + '.' if mod else ''}{getattr(node.target, '__name__', node.target)}"


def _array(t):
    return t.detach().cpu().to(torch.float64).numpy()


class _Exporter:
    def __init__(self, gm, shapes, symbols):
        self.gm, self.shapes, self.symbols = gm, shapes, list(symbols)
        self.modules = dict(gm.named_modules())
        self.inputs, self.weights, self.ops, self.outputs = [], {}, [], []
        self.env, self.lead = {}, {}  # node -> value name; value name -> its leading symbolic axes
        # Images: torch holds them channels first (N, C, H, W), the IR channels last (N, H, W, C). A value
        # in `image` is torch's NCHW tensor stored NHWC; a value in `flat` is a flattened image in (h, w, c)
        # order, with the torch (c, h, w) index of each of its elements (the next Linear's columns follow it).
        self.images = any(isinstance(m, nn.Conv2d) for m in gm.modules())
        self.image, self.flat = set(), {}
        self.taken = {n.name for n in gm.graph.nodes if n.op != "output"}

    def refuse(self, node, why="has no op in the aoc graph IR"):
        raise aocsim.Error(f"export: {_what(node, self.modules)} (fx node '{node.name}') {why}; supported: {SUPPORTED}")

    def weight(self, name, tensor):
        """The weight `name` holding tensor (declared once: a module called twice shares its weights)."""
        if name in self.weights:
            return name
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        self.weights[name] = _array(tensor)
        if not np.isfinite(self.weights[name]).all():
            raise aocsim.Error(f"export: weight '{name}': NaN or infinite value")
        self.lead[name] = 0
        return name

    def value(self, arg, node):
        """The graph value an argument of node names: a node's result, or a number as a scalar weight."""
        if isinstance(arg, fx.Node):
            v = self.env[arg]
            if v is None:
                self.refuse(node, f"uses '{arg.name}', a Python value computed from a tensor's shape, not a tensor")
            return v
        if isinstance(arg, (int, float)) and not isinstance(arg, bool):
            return self.weight(f"{node.name}.const", torch.tensor(float(arg)))
        self.refuse(node, f"has an operand {arg!r} that is neither a tensor nor a number")

    def op(self, kind, node, ins, attrs=None, out=None, name=None):
        out = out or node.name
        if kind in _LAYOUT_KEEPING:
            laid = [v for v in ins if v in self.image or v in self.flat]
            if laid:
                tensors = [v for v in ins if self.weights.get(v, np.zeros(2)).size != 1]  # a number broadcasts in any layout
                if any(v not in laid for v in tensors) or len({tuple(self.flat[v]) if v in self.flat else "image" for v in laid}) != 1:
                    self.refuse(node, "mixes an image (channels first in torch, last in the graph) with a tensor of another layout")
                if laid[0] in self.image:
                    self.image.add(out)
                else:
                    self.flat[out] = self.flat[laid[0]]
        elif any(v in self.image or v in self.flat for v in ins) and kind not in ("Conv2d", "MaxPool2d", "AvgPool2d", "Linear", "Reshape"):
            self.refuse(node, "reads an image, which the graph holds channels last: only Conv2d, pooling, elementwise ops, "
                              "Flatten and Linear take one")
        d = {"op": kind, "name": name or node.name, "in": ins, "out": [out]}
        if attrs:
            d["attrs"] = attrs
        self.ops.append(d)
        self.lead[out] = max([self.lead[v] for v in ins if v in self.lead] + [0])
        return out

    def run(self, examples):
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(examples):
            raise aocsim.Error(f"export: the module's forward takes {len(placeholders)} inputs "
                               f"({', '.join(n.name for n in placeholders)}); example_inputs gave {len(examples)}")
        for n, x in zip(placeholders, examples):
            self.input(n, x)
        for n in self.gm.graph.nodes:
            if n.op == "get_attr":
                self.env[n] = self.weight(n.target, functools.reduce(getattr, n.target.split("."), self.gm))
            elif n.op == "output":
                self.outputs = [self.value(a, n) for a in _flat(n.args[0])]
                self.name_outputs()
            elif n.op != "placeholder":
                # a node whose result holds no tensor is shape arithmetic (x.size(0), x.shape[1] * 2): only a
                # reshape may read it, and that takes its target shape from the traced result instead
                self.env[n] = self.call(n) if self.shapes.tensors[n] else None

    def name_outputs(self):
        """The results are "output" ("output.0", ...), not the fx names of the last nodes (_2, add)."""
        made = {v for o in self.ops for v in o["out"]}
        for i, v in enumerate(self.outputs):
            new = "output" if len(self.outputs) == 1 else f"output.{i}"
            if v not in made or self.outputs.count(v) > 1 or new in self.taken:
                continue
            for o in self.ops:  # top-level ops only: a body reads no top-level value but through its captures
                o["in"], o["out"] = [new if x == v else x for x in o["in"]], [new if x == v else x for x in o["out"]]
                if o.get("attrs", {}).get("like") == v:
                    o["attrs"]["like"] = new
            self.outputs[i] = new

    def input(self, node, x):
        if not isinstance(x, torch.Tensor):
            raise aocsim.Error(f"export: example input '{node.name}': expected a tensor, got {type(x).__name__}")
        if x.dtype == torch.bool or x.is_complex():
            raise aocsim.Error(f"export: example input '{node.name}': dtype {x.dtype} (the graph takes float64 or int64)")
        # named as forward's argument (fx renames `input`, a builtin, to input_1)
        name = node.target if node.target not in self.taken - {node.name} else node.name
        self.taken.add(name)
        k = min(len(self.symbols), x.dim())
        shape = list(x.shape[k:])
        if self.images and x.dim() == 4 and x.is_floating_point():  # an image batch: channels last in the graph
            if k != 1:
                raise aocsim.Error(f"export: example input '{node.name}': an image batch takes one leading symbol (the batch), not {k}")
            shape = shape[1:] + shape[:1]
            self.image.add(name)
        self.inputs.append({"name": name, "dtype": "f64" if x.is_floating_point() else "i64", "shape": self.symbols[:k] + shape})
        self.env[node], self.lead[name] = name, k

    def call(self, n):
        t, a = n.target, n.args
        # keywords that do not change the value (F.relu's inplace, F.softmax's _stacklevel, a dtype of None)
        kw = {k: v for k, v in n.kwargs.items() if v is not None and k not in ("inplace", "_stacklevel")}
        if n.op == "call_module":
            return self.module(n, self.modules[t])
        if t in _IDENTITY:
            return self.value(a[0], n)
        if t in _UNARY and not kw and len(a) == 1:
            return self.op(_UNARY[t], n, [self.value(a[0], n)])
        if t in _BINARY and not kw and len(a) == 2:
            return self.op(_BINARY[t], n, [self.value(a[0], n), self.value(a[1], n)])
        if t in _MATMUL and not kw:
            if not isinstance(a[1], fx.Node) or len(self.shapes.shape[a[1]]) != 2 or self.lead.get(self.env[a[1]], 0):
                self.refuse(n, "multiplies by something other than a fixed matrix (MatMul's b[k, n])")
            return self.op("MatMul", n, [self.value(a[0], n), self.value(a[1], n)])
        if t is F.linear:
            args = list(a) + [kw[k] for k in ("weight", "bias") if k in kw]
            return self.op("Linear", n, [self.value(v, n) for v in args if v is not None])
        if t in _SOFTMAX:
            dim = a[1] if len(a) > 1 else kw.get("dim")
            return self.softmax(n, a[0], dim)
        if t is F.softplus:
            return self.softplus(n, a[0], a[1] if len(a) > 1 else kw.get("beta", 1), a[2] if len(a) > 2 else kw.get("threshold", 20))
        if t in _RESHAPE:
            return self.reshape(n, a[0])
        if kw and (t in _UNARY or t in _BINARY or t in _MATMUL):
            self.refuse(n, f"has keyword(s) {', '.join(kw)}, which the IR's op does not take")
        self.refuse(n)

    def module(self, n, m):
        x, t = n.args[0], n.target
        if isinstance(m, _aoc_layer()):
            return self.aoc_layer(n, m)
        if isinstance(m, nn.Linear):
            v = self.value(x, n)
            if v in self.image:
                self.refuse(n, "multiplies an image's last axis (its width in torch, its channels in the graph): flatten it first")
            w = m.weight if v not in self.flat else m.weight[:, self.flat[v]]  # columns in the graph's (h, w, c) order
            ins = [v, self.weight(f"{t}.weight", w)]
            return self.op("Linear", n, ins + ([self.weight(f"{t}.bias", m.bias)] if m.bias is not None else []))
        if isinstance(m, nn.Conv2d):
            return self.conv2d(n, x, m)
        if isinstance(m, (nn.MaxPool2d, nn.AvgPool2d)):
            return self.pool2d(n, x, m)
        if type(m) in _UNARY_MODULES:
            return self.op(_UNARY_MODULES[type(m)], n, [self.value(x, n)])
        if isinstance(m, nn.Softplus):
            return self.softplus(n, x, m.beta, m.threshold)
        if isinstance(m, nn.Softmax):
            return self.softmax(n, x, m.dim)
        if isinstance(m, nn.Flatten):
            return self.reshape(n, x)
        if isinstance(m, nn.Embedding):
            if m.max_norm is not None:
                self.refuse(n, "has max_norm (it rescales the table as it reads it)")
            return self.op("Embedding", n, [self.value(x, n), self.weight(f"{t}.weight", m.weight)])
        if isinstance(m, _PASS_MODULES):
            return self.value(x, n)
        self.refuse(n)

    def softmax(self, n, x, dim):
        rank = len(self.shapes.shape[x])
        if dim is None or dim not in (-1, rank - 1):
            self.refuse(n, f"is over axis {dim} (the IR's Softmax is over the last axis of {rank})")
        return self.op("Softmax", n, [self.value(x, n)])

    def softplus(self, n, x, beta, threshold):
        # torch's softplus is x past the threshold, the IR's log(1 + exp(x)) everywhere: they differ by
        # log(1 + exp(-threshold)), under 2.1e-9 from torch's default 20 up
        if beta != 1 or threshold < 20:
            self.refuse(n, f"has beta {beta}, threshold {threshold} (the IR's Softplus is log(1 + exp(x)): beta 1, threshold >= 20)")
        return self.op("Softplus", n, [self.value(x, n)])

    def conv2d(self, n, x, m):
        v, t = self.value(x, n), n.target
        if v not in self.image:
            self.refuse(n, "reads a tensor that is not an image batch (N, C, H, W) from the module's input")
        pair = lambda a: tuple(a) if isinstance(a, (tuple, list)) else (a, a)
        why = []
        if pair(m.padding) != (0, 0) or m.padding == "same":
            why.append(f"padding {m.padding} (the IR's Conv2d is valid: pad the data, or padding=0)")
        if pair(m.dilation) != (1, 1):
            why.append(f"dilation {m.dilation}")
        if m.groups != 1:
            why.append(f"groups {m.groups}")
        if pair(m.stride)[0] != pair(m.stride)[1]:
            why.append(f"stride {m.stride} (one stride for both axes)")
        if why:
            self.refuse(n, "has " + ", ".join(why))
        W = self.weight(f"{t}.weight", m.weight.permute(0, 2, 3, 1))  # [Cout, kh, kw, Cin]
        ins = [v, W] + ([self.weight(f"{t}.bias", m.bias)] if m.bias is not None else [])
        out = self.op("Conv2d", n, ins, {"stride": int(pair(m.stride)[0])})
        self.image.add(out)
        return out

    def pool2d(self, n, x, m):
        v = self.value(x, n)
        size, stride = m.kernel_size, m.stride if m.stride is not None else m.kernel_size
        extra = isinstance(m, nn.MaxPool2d) and (m.dilation != 1 or m.return_indices) or getattr(m, "ceil_mode", False)
        if v not in self.image or isinstance(size, (tuple, list)) or stride != size or m.padding != 0 or extra:
            self.refuse(n, f"is not a square window at its own stride without padding over an image (kernel {size}, stride {stride}, "
                           f"padding {m.padding})")
        out = self.op("MaxPool2d" if isinstance(m, nn.MaxPool2d) else "AvgPool2d", n, [v], {"size": int(size)})
        self.image.add(out)
        return out

    def reshape(self, n, x):
        # The target shape is the traced result's: the leading symbolic axes kept (0 in ONNX's convention),
        # the rest fixed sizes; a reshape that moves the batch axis would not hold for another batch size.
        v = self.value(x, n)
        k = self.lead[v]
        before, after = self.shapes.shape[x], self.shapes.shape[n]
        if after[:k] != before[:k]:
            self.refuse(n, f"reshapes {list(before)} to {list(after)}, changing the leading axes {self.symbols[:k]}")
        if v in self.flat:
            self.refuse(n, "reshapes a flattened image again (its elements are in the graph's channels-last order)")
        if v in self.image:
            if len(before) != 4 or list(after) != [before[0], before[1] * before[2] * before[3]]:
                self.refuse(n, f"reshapes an image {list(before)} to {list(after)}: only a flatten to (N, C*H*W) is mapped")
            C, H, W = before[1:]
            out = self.op("Reshape", n, [v], {"shape": [0] * k + list(after[k:])})
            # the graph flattens (h, w, c); element g of it is torch's element c*H*W + h*W + w
            self.flat[out] = [c * H * W + h * W + w for h in range(H) for w in range(W) for c in range(C)]
            return out
        return self.op("Reshape", n, [v], {"shape": [0] * k + list(after[k:])})

    def aoc_layer(self, n, m):
        """The layer's loop as a FixedPoint: z <- alpha z + tanh(z) (beta W) + u, u = x + b computed once
        (the injection), from z = 0, with the layer's Machine's stop rule, tolerance, cap and damping."""
        t, mc = n.target, m.machine
        # beta folded into the matrix (and the contraction's scaling): the product the machine is programmed with
        W = self.weight(f"{t}.W", m.loop_weight().detach().to(torch.float64))
        u = self.op("Add", n, [self.value(n.args[0], n), self.weight(f"{t}.bias", m.bias)], out=f"{n.name}.u", name=f"{n.name}.inject")
        z, uc, th, mix, leak, s, nxt = (f"{n.name}.{k}" for k in ("z", "uc", "tanh", "mix", "leak", "sum", "next"))
        ops = [{"op": "Tanh", "name": th, "in": [z], "out": [th]}, {"op": "MatMul", "name": mix, "in": [th, W], "out": [mix]}]
        if bool((m.alpha != 0).any()):
            # the leak is a Mul of the state by a gain per channel, which the compiler places in the loop's electronics
            # (compiler/passes.cpp, loop_leak); a layer without one leaves it out
            ops += [{"op": "Mul", "name": leak, "in": [z, self.weight(f"{t}.alpha", m.alpha)], "out": [leak]},
                    {"op": "Add", "name": s, "in": [leak, mix], "out": [s]}]
            mix = s
        ops.append({"op": "Add", "name": nxt, "in": [mix, uc], "out": [nxt]})
        body = {"args": [z, uc], "ops": ops, "results": [nxt]}
        attrs = {"tol": float(mc.tol), "max_iter": int(mc.max_iter), "damping": float(mc.damping), "rule": mc.rule, "like": u}
        self.ops.append({"op": "FixedPoint", "name": n.name, "in": [u], "out": [n.name], "attrs": attrs, "body": body})
        self.lead[n.name] = self.lead[u]
        return n.name

    def document(self, name):
        return {"format": "aoc-graph", "version": 1, "name": name, "inputs": self.inputs,
                "weights": [{"name": k, "shape": list(v.shape)} for k, v in self.weights.items()],
                "ops": self.ops, "outputs": self.outputs}


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [v for o in out for v in _flat(o)]
    return [out]


def export(module, example_inputs, path, *, name=None, symbols=("B",)):
    """Write an ``nn.Module`` as an aoc graph: path (the graph JSON, docs/ir.md) and path with .h5 (its
    weights, float64), as ``aoc import -o`` does. Returns the graph (an aocsim.Graph, with its weights)
    ready to ``compile``.

    example_inputs: a tensor or a tuple of tensors, one per argument of forward; they are run through the
    module once to learn every value's shape. Each input's leading axes are the symbols given (default:
    axis 0 is the batch "B", so the graph runs on any batch); its other axes are the example's sizes.
    Floating inputs are f64, integer ones (token ids) i64. name: the graph's name (default: the
    module's class). Supported: see SUPPORTED; any other node raises aocsim.Error naming it and its fx
    node. An AOCLayer becomes a FixedPoint with its Machine's rule, tol, max_iter and damping; its mode,
    noise and converters are the compiled program's run-time switches instead.
    """
    examples = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    tracer = _Tracer()
    try:
        gm = fx.GraphModule(module, tracer.trace(module))
    except Exception as e:  # control flow on values, untraceable calls: fx's own message says where
        raise aocsim.Error(f"export: torch.fx cannot trace {type(module).__name__}: {e}") from e
    shapes = _Shapes(gm)
    with torch.no_grad():
        shapes.run(*examples)
    ex = _Exporter(gm, shapes, symbols)
    ex.run(examples)
    path = os.fspath(path)
    weights = os.path.splitext(path)[0] + ".h5"
    import h5py  # python3-h5py (scripts/install-deps)
    with tempfile.TemporaryDirectory(prefix="aoc-export-") as tmp:
        g, w = os.path.join(tmp, "g.json"), os.path.join(tmp, "g.h5")
        with open(g, "w") as f:
            json.dump(ex.document(name or type(module).__name__), f)
        with h5py.File(w, "w") as f:
            for k, v in ex.weights.items():
                f.create_dataset(k, data=v)
        graph = aocsim.load_graph(g, w)
    # aoc's own writers: the graph in its canonical form (docs/ir.md) and the weights, each atomically
    graph.save(path, weights)
    return graph
