"""aocsim.torch.convert: an existing model's Linear layers on the simulated machine, as aihwkit's
convert_to_analog.

``convert(module, machine)`` replaces every ``nn.Linear`` of a module (in place, and returns it) by an
``AnalogLinear`` whose product x W^T runs as a compiled program on ``machine`` (a
``Machine(hw, optics="measured" | "ideal", noise=..., quantize=...)``): the weights cut into tiles,
each programmed for the measured chain (compensation, detector trims, SLM codes), the inputs through
the DAC at the layer's input range, the outputs through the ADC, the machine's noise. The bias is
added digitally after the ADC, as a compiled program does. Backward is straight-through: the gradient
of the exact product x W^T + b, so training sees the machine in its forward pass only
(hardware-aware training). ``per_layer`` gives named layers machines of their own.
"""

import numpy as np
import torch
from torch import nn

import aocsim


class AnalogLinear(nn.Module):
    """An nn.Linear whose product runs on the simulated machine (see the module's docstring).

    input_range: the DAC's range, the largest |input| seen in training (a running maximum, kept in the
    state dict) or given; 0 until the first forward pass, which sets it. The layer's program is
    compiled with it (``compile(calibrate=...)``), and again whenever the weights or it change.
    """

    def __init__(self, in_features, out_features, machine, bias=True, dtype=torch.float32):
        super().__init__()
        if machine.optics is None:
            raise aocsim.Error("AnalogLinear: the machine runs the loop core; give a compiled machine, "
                               "Machine(hw, optics=\"measured\") or optics=\"ideal\"")
        self.in_features, self.out_features, self.machine = int(in_features), int(out_features), machine
        self.weight = nn.Parameter(torch.empty(self.out_features, self.in_features, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(self.out_features, dtype=dtype)) if bias else None
        self.register_buffer("input_range", torch.zeros((), dtype=torch.float64))
        nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)  # nn.Linear's own initialisation

    @classmethod
    def from_linear(cls, linear, machine):
        layer = cls(linear.in_features, linear.out_features, machine, bias=linear.bias is not None, dtype=linear.weight.dtype)
        with torch.no_grad():
            layer.weight.copy_(linear.weight)
            if linear.bias is not None:
                layer.bias.copy_(linear.bias)
        return layer.to(linear.weight.device)

    def program(self):
        """This layer's product x W^T compiled for its machine at its input range."""
        n = self.in_features
        cal = np.full((1, n), float(self.input_range)) if float(self.input_range) > 0 else None
        product = nn.Sequential(nn.Linear(n, self.out_features, bias=False).double())
        return self.machine.compiled(("linear", n, self.out_features), product, n,
                                     {"0.weight": self.weight.detach().cpu().double().numpy()}, cal, owner=self)

    def forward(self, x):
        lead = x.shape[:-1]
        flat = x.reshape(-1, self.in_features)
        seen = float(flat.detach().abs().max()) if flat.numel() else 0.0
        if self.training or float(self.input_range) == 0:
            self.input_range.fill_(max(float(self.input_range), seen))
        exact = flat @ self.weight.t()
        program = self.program()
        r = self.machine.run(program, flat.detach().cpu().double().numpy(), self.machine.next_seed())
        y = torch.from_numpy(np.ascontiguousarray(r.outputs[program.outputs[0]])).to(device=x.device, dtype=x.dtype)
        out = exact + (y - exact).detach()  # the machine's values forward, the exact product's gradient backward
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*lead, self.out_features)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, machine={self.machine!r}"


def convert(module, machine, per_layer=None):
    """Replace every nn.Linear of module by an AnalogLinear on machine (per_layer: {qualified name:
    Machine} for layers that run elsewhere); returns the module (changed in place), as aihwkit's
    convert_to_analog. A module that is itself an nn.Linear is returned converted."""
    per_layer = dict(per_layer or {})
    if isinstance(module, nn.Linear):
        return AnalogLinear.from_linear(module, per_layer.pop("", machine))
    for name, child in list(module.named_modules()):
        for attr, sub in list(child.named_children()):
            full = f"{name}.{attr}" if name else attr
            if isinstance(sub, nn.Linear):
                setattr(child, attr, AnalogLinear.from_linear(sub, per_layer.pop(full, machine)))
    if per_layer:
        raise aocsim.Error(f"convert: per_layer names no nn.Linear of the module: {', '.join(sorted(per_layer))}")
    return module
