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
    with pytest.raises(aocsim.Error, match="per_layer names no nn.Linear of the module: nope"):
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
