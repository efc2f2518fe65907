"""aocsim.torch.export: PyTorch modules written as aoc graphs, compiled, and run on the exact reference."""
import h5py
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="aocsim.torch needs PyTorch (python3-torch)")
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import aocsim  # noqa: E402
from aocsim.torch import AOCLayer, export  # noqa: E402


def cpu_outputs(graph, inputs):
    program = graph.compile("aoc-48")
    return program, program.run({k: v.numpy() for k, v in inputs.items()}, backend="cpu")


def test_an_mlp_is_exported_compiled_and_runs_as_the_module(tmp_path):
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 3)).double()
    x = torch.randn(5, 6, dtype=torch.float64)
    returned = export(mlp, x, tmp_path / "mlp.json")
    with h5py.File(tmp_path / "mlp.h5") as f:  # the weights beside the graph, as `aoc import -o` writes them
        assert sorted(f) == ["0.bias", "0.weight", "2.bias", "2.weight"]
        assert np.array_equal(f["0.weight"][...], mlp[0].weight.detach().numpy())
    graph = aocsim.load_graph(tmp_path / "mlp.json")
    assert graph.to_json() == returned.to_json() and graph.inputs == [("input", "f64[B, 6]")]
    program, r = cpu_outputs(graph, {"input": x})
    assert program.outputs == ["output"]
    assert np.abs(r.outputs["output"] - mlp(x).detach().numpy()).max() < 1e-9
    # the batch axis is the symbol B: the graph runs on another batch than the example's
    x7 = torch.randn(7, 6, dtype=torch.float64)
    r7 = program.run({"input": x7.numpy()}, backend="cpu")
    assert np.abs(r7.outputs["output"] - mlp(x7).detach().numpy()).max() < 1e-9


class Deq(nn.Module):
    """An injection, an AOC layer with a leak per channel, a gain and a bias, a residual and a readout."""

    def __init__(self, alpha):
        super().__init__()
        self.inp = nn.Linear(6, 16, dtype=torch.float64)
        self.deq = AOCLayer(16, alpha=alpha, beta=0.8, dtype=torch.float64)  # the ideal loop in float64
        self.out = nn.Linear(16, 3, dtype=torch.float64)
        with torch.no_grad():
            if alpha:
                self.deq.alpha.copy_(torch.linspace(0.1, 0.6, 16, dtype=torch.float64))
            self.deq.bias.normal_(0, 0.3)

    def forward(self, x):
        h = self.inp(x)
        return self.out(self.deq(h) + h)


@pytest.mark.parametrize("alpha", [0.3, 0.0])
def test_an_aoc_layer_becomes_its_loop_as_a_fixed_point(tmp_path, alpha):
    torch.manual_seed(1)
    model = Deq(alpha)
    x = torch.randn(5, 6, dtype=torch.float64)
    program, r = cpu_outputs(export(model, x, tmp_path / "deq.json"), {"x": x})
    assert r.fixed_points[0].converged.all()
    # The module's forward (aocsim.solve) and the program's FixedPoint each stop once the relative
    # residual is under the layer's tol, 1e-9, so each is within about 1e-9 / (1 - L) of the fixed
    # point (L < 1: the loop's contraction there); the program injects x + b once, so their sums round
    # differently and the two solves need not stop at the same step. 1e-6 holds that with room.
    assert np.abs(r.outputs["output"] - model(x).detach().numpy()).max() < 1e-6
    # the leak alpha z is a Mul by a gain per channel, the loop electronics' own: with or without one the loop is native
    assert 'layout = "native"' in str(program)
    assert ('.leak = Mul(' in str(program)) == (alpha != 0)


def test_ops_functions_and_methods_map_to_the_ir(tmp_path):
    class Many(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.fc = nn.Linear(12, 6, bias=False)
            self.M = nn.Parameter(torch.randn(6, 5))
            self.w, self.b = nn.Parameter(torch.randn(3, 5)), nn.Parameter(torch.randn(3))

        def forward(self, ids, x):
            e = self.emb(ids).flatten(1)
            h = torch.relu(self.fc(e)) + 2.0 * x - 1
            h = x.view(x.size(0), 2, 3).reshape(x.shape[0], -1) * h
            h = torch.sigmoid(h) @ self.M
            h = F.silu(h) - torch.exp(-h) + F.softplus(h) + torch.tanh(h).neg()
            h = F.linear(h, self.w, self.b)
            return F.softmax(h, dim=-1), h.sigmoid()

    torch.manual_seed(2)
    model = Many().double()
    ids, x = torch.randint(0, 10, (4, 3)), torch.randn(4, 6, dtype=torch.float64)
    graph = export(model, (ids, x), tmp_path / "many.json")
    assert [t for _, t in graph.inputs] == ["i64[B, 3]", "f64[B, 6]"]
    program, r = cpu_outputs(graph, {"ids": ids, "x": x})
    for name, want in zip(program.outputs, model(ids, x)):
        assert np.abs(r.outputs[name] - want.detach().numpy()).max() < 1e-12


@pytest.mark.parametrize("layer, what", [
    (nn.LayerNorm(4), r"torch\.nn\.LayerNorm \(module '1'\) \(fx node '_1'\)"),
    (nn.GELU(), r"torch\.nn\.GELU \(module '1'\) \(fx node '_1'\)"),
])
def test_a_module_the_ir_lacks_is_refused_naming_it_and_its_node(tmp_path, layer, what):
    with pytest.raises(aocsim.Error, match=what + " has no op in the aoc graph IR"):
        export(nn.Sequential(nn.Linear(3, 4), layer), torch.randn(2, 3), tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists() and not (tmp_path / "bad.h5").exists()


class Apply(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x):
        return self.f(x)


@pytest.mark.parametrize("f, what", [
    (lambda x: torch.sort(x)[0], r"torch\.sort \(fx node 'sort'\) has no op"),
    (lambda x: x.cumsum(-1), r"Tensor\.cumsum \(fx node 'cumsum'\) has no op"),
    (lambda x: x.flatten(0), r"Tensor\.flatten \(fx node 'flatten'\) reshapes \[3, 5\] to \[15\], changing the leading axes"),
    (lambda x: torch.add(x, x, alpha=2), r"torch\.add \(fx node 'add'\) has keyword\(s\) alpha"),
    (lambda x: F.softplus(x, beta=2), r"softplus \(fx node 'softplus'\) has beta 2"),
])
def test_a_function_or_method_the_ir_lacks_is_refused_naming_it(tmp_path, f, what):
    with pytest.raises(aocsim.Error, match=what):
        export(Apply(f), torch.randn(3, 5), tmp_path / "bad.json")


def test_a_cnn_is_exported_channels_last_and_runs_as_the_module(tmp_path):
    torch.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(2, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 6, 2, stride=2), nn.Tanh(),
                        nn.AvgPool2d(1), nn.Flatten(), nn.Linear(6 * 2 * 2, 5)).double()
    x = torch.randn(7, 2, 11, 11, dtype=torch.float64)
    graph = export(cnn, x, tmp_path / "cnn.json")
    assert graph.inputs == [("input", "f64[B, 11, 11, 2]")]  # channels last in the graph
    program = graph.compile("aoc-48")
    r = program.run({"input": x.permute(0, 2, 3, 1).numpy()}, backend="cpu")
    assert np.abs(r.outputs["output"] - cnn(x).detach().numpy()).max() < 1e-12  # the Linear's columns follow the flatten
    for bad, why in ((nn.Conv2d(2, 4, 3, padding=1), r"padding \(1, 1\)"), (nn.Conv2d(2, 4, 3, dilation=2), "dilation"),
                     (nn.MaxPool2d(3, stride=2), "not a square window at its own stride")):
        with pytest.raises(aocsim.Error, match=why):
            export(nn.Sequential(bad).double(), x, tmp_path / "bad.json")
    with pytest.raises(aocsim.Error, match="multiplies an image's last axis"):
        export(nn.Sequential(nn.Conv2d(2, 4, 3), nn.Linear(9, 3)).double(), x, tmp_path / "bad.json")
