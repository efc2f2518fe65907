"""aocsim.torch.convert: Linear layers of an existing model on the compiled machine (as aihwkit's
convert_to_analog): one converted Linear against the compiled program of the same weights, the
conversion itself, the straight-through gradient, the input range."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="aocsim.torch needs PyTorch (python3-torch)")
from torch import nn  # noqa: E402

import aocsim  # noqa: E402
from aocsim.torch import AnalogLinear, Machine, convert, export  # noqa: E402


def machine(**kw):
    return Machine("aoc-48", optics="measured", noise=True, quantize=True, precision="f64", seed=5, advance_seed=False, **kw)


def test_a_converted_linear_is_the_compiled_program_of_its_weights(tmp_path):
    torch.manual_seed(1)
    lin = nn.Linear(60, 50).double()  # 2 x 2 tiles on aoc-48
    x = torch.randn(32, 60, dtype=torch.float64)
    analog = AnalogLinear.from_linear(lin, machine())
    with torch.no_grad():
        y = analog(x).numpy()
    assert float(analog.input_range) == float(x.abs().max())
    product = nn.Sequential(nn.Linear(60, 50, bias=False).double())
    with torch.no_grad():
        product[0].weight.copy_(lin.weight)
    program = export(product, x, tmp_path / "lin.json").compile("aoc-48", calibrate=np.full((1, 60), float(x.abs().max())))
    r = program.run({"input": x.numpy()}, backend="sim", quantize=True, noise=True, precision="f64", seed=5)
    want = r.outputs[program.outputs[0]] + lin.bias.detach().numpy()
    assert np.abs(y - want).max() < 1e-12  # the same machine; the bias added after the ADC
    exact = lin(x).detach().numpy()
    assert 1e-4 < np.abs(y - exact).max() < 0.2 * np.abs(exact).max()  # the machine's errors, not a digital product


def test_convert_replaces_every_linear_and_gives_named_layers_their_own_machine():
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), nn.Sequential(nn.Linear(16, 8), nn.Tanh()), nn.Linear(8, 3))
    ideal = Machine("aoc-48", optics="ideal")
    out = convert(mlp, machine(), per_layer={"3.0": ideal})
    assert out is mlp
    kinds = [type(m).__name__ for m in mlp.modules()]
    assert "Linear" not in kinds and kinds.count("AnalogLinear") == 3
    assert mlp[3][0].machine is ideal and mlp[1].machine is not ideal
    assert mlp(torch.randn(5, 3, 4)).shape == (5, 3)
    assert isinstance(convert(nn.Linear(4, 2), machine()), AnalogLinear)
    import copy
    import pickle
    twin = copy.deepcopy(mlp)  # a copy of a model that has run compiles again when it runs
    assert torch.equal(twin(torch.ones(2, 3, 4)), mlp(torch.ones(2, 3, 4)))
    pickle.loads(pickle.dumps(mlp))
    with pytest.raises(aocsim.Error, match="per_layer names no nn.Linear or nn.Conv2d of the module: nope"):
        convert(nn.Sequential(nn.Linear(4, 2)), machine(), per_layer={"nope": ideal})
    with pytest.raises(aocsim.Error, match="give a compiled machine"):
        convert(nn.Linear(4, 2), Machine("aoc-48"))


def test_the_gradient_is_the_exact_products_and_the_range_is_the_largest_input_seen_in_training():
    torch.manual_seed(2)
    lin = nn.Linear(10, 6).double()
    analog = AnalogLinear.from_linear(lin, machine())
    x = torch.randn(16, 10, dtype=torch.float64)
    analog(x).pow(2).sum().backward()
    y = analog(x).detach()
    lin.weight.grad = None
    # straight-through: d/dW of sum((x W^T + b + the machine's error, held)^2) is 2 (y)^T x
    assert torch.allclose(analog.weight.grad, 2 * y.t() @ x, atol=1e-9)
    analog.train()
    analog(3 * x)
    assert float(analog.input_range) == float(3 * x.abs().max())
    analog.eval()
    analog(10 * x)  # evaluation keeps the range training found (larger inputs clip at the DAC)
    assert float(analog.input_range) == float(3 * x.abs().max())


def test_a_converted_conv2d_is_the_compiled_program_of_its_kernel(tmp_path):
    from aocsim.torch import AnalogConv2d
    torch.manual_seed(3)
    conv = nn.Conv2d(3, 5, 3, stride=1, padding=1).double()
    x = torch.randn(4, 3, 8, 8, dtype=torch.float64)
    analog = convert(conv, machine())
    assert isinstance(analog, AnalogConv2d)
    with torch.no_grad():
        y = analog(x)
    assert y.shape == conv(x).shape == (4, 5, 8, 8)
    # the same program from the exported kernel (padding done digitally first, channels last in the graph)
    product = nn.Sequential(nn.Conv2d(3, 5, 3, bias=False).double())
    with torch.no_grad():
        product[0].weight.copy_(conv.weight)
    xp = torch.nn.functional.pad(x, (1, 1, 1, 1))
    rng = float(xp.abs().max())
    program = export(product, xp, tmp_path / "conv.json").compile("aoc-48", calibrate=np.full((1, 10, 10, 3), rng))
    r = program.run({"input": xp.permute(0, 2, 3, 1).numpy()}, backend="sim", quantize=True, noise=True, precision="f64", seed=5)
    want = torch.from_numpy(r.outputs[program.outputs[0]]).permute(0, 3, 1, 2) + conv.bias.detach().view(1, -1, 1, 1)
    assert float((y - want).abs().max()) < 1e-12
    exact = conv(x).detach()
    assert 1e-4 < float((y - exact).abs().max()) < 0.2 * float(exact.abs().max())
    with pytest.warns(RuntimeWarning, match="Conv2d '0' stays digital: groups 3"):
        kept = convert(nn.Sequential(nn.Conv2d(3, 3, 3, groups=3)), machine())
    assert isinstance(kept[0], nn.Conv2d)


def test_a_small_cnn_trains_through_the_machine():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    # bright left half or right half of a 6 x 6 image, in noise
    y = torch.randint(0, 2, (256,), generator=g)
    x = 0.3 * torch.randn(256, 1, 6, 6, generator=g)
    x[y == 0, :, :, :3] += 1
    x[y == 1, :, :, 3:] += 1
    cnn = convert(nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16, 2)),
                  Machine("aoc-48", optics="measured", noise=True, quantize=True, seed=1))
    opt = torch.optim.Adam(cnn.parameters(), lr=0.05)
    for step in range(30):
        i = torch.randint(0, 256, (64,), generator=g)
        opt.zero_grad()
        nn.functional.cross_entropy(cnn(x[i]), y[i]).backward()
        opt.step()
    cnn.eval()
    with torch.no_grad():
        assert float((cnn(x).argmax(1) == y).double().mean()) > 0.9
