"""aocsim.torch.convert: an existing model's Linear layers on the simulated machine, as aihwkit's
convert_to_analog.

``convert(module, machine)`` replaces every ``nn.Linear`` of a module (in place, and returns it) by an
``AnalogLinear`` (every ``nn.Conv2d`` by an ``AnalogConv2d``) whose product x W^T runs as a compiled program on ``machine`` (a
``Machine(hw, optics="measured" | "ideal", noise=..., quantize=...)``): the weights cut into tiles,
each programmed for the measured chain (compensation, detector trims, SLM codes), the inputs through
the DAC at the layer's input range, the outputs through the ADC, the machine's noise. The bias is
added digitally after the ADC, as a compiled program does. Backward is straight-through: the gradient
of the exact product x W^T + b, so training sees the machine in its forward pass only
(hardware-aware training). ``per_layer`` gives named layers machines of their own.
"""

import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import aocsim


class _OnMachine(nn.Module):
    """What AnalogLinear and AnalogConv2d share: a compiled machine, the input range (the DAC's: the
    largest |input| seen in training, a running maximum kept in the state dict; 0 until the first
    forward pass, which sets it), and the pass through the machine with a straight-through gradient."""

    def __init__(self, machine, kind):
        super().__init__()
        if machine.optics is None:
            raise aocsim.Error(f"{kind}: the machine runs the loop core; give a compiled machine, "
                               "Machine(hw, optics=\"measured\") or optics=\"ideal\"")
        self.machine = machine
        self.register_buffer("input_range", torch.zeros((), dtype=torch.float64))

    def calibration(self, shape):
        """Sample inputs (channels last) that set the DAC's range to the input range; None before it has one."""
        r = float(self.input_range)
        return np.full(shape, r) if r > 0 else None

    def through_machine(self, x, exact, program, channels_last=False):
        """The machine's values of the product `exact` of x forward, the exact product's gradient backward.
        program: a function giving the compiled program once the input range has seen x."""
        seen = float(x.detach().abs().max()) if x.numel() else 0.0
        if self.training or float(self.input_range) == 0:
            self.input_range.fill_(max(float(self.input_range), seen))
        compiled = program()
        a = x.detach().cpu().double()
        r = self.machine.run(compiled, (a.permute(0, 2, 3, 1) if channels_last else a).numpy(), self.machine.next_seed())
        y = torch.from_numpy(np.ascontiguousarray(r.outputs[compiled.outputs[0]]))
        y = (y.permute(0, 3, 1, 2) if channels_last else y).to(device=x.device, dtype=x.dtype)
        return exact + (y - exact).detach()


class AnalogLinear(_OnMachine):
    """An nn.Linear whose product runs on the simulated machine (see the module's docstring). The
    layer's program is compiled at its input range (``compile(calibrate=...)``), and again whenever the
    weights or the range change."""

    def __init__(self, in_features, out_features, machine, bias=True, dtype=torch.float32):
        super().__init__(machine, "AnalogLinear")
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.weight = nn.Parameter(torch.empty(self.out_features, self.in_features, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(self.out_features, dtype=dtype)) if bias else None
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
        n, m = self.in_features, self.out_features
        return self.machine.compiled(("linear", n, m), lambda: nn.Sequential(nn.Linear(n, m, bias=False).double()), (1, n),
                                     {"0.weight": self.weight.detach().cpu().double().numpy()}, self.calibration((1, n)), owner=self)

    def forward(self, x):
        flat = x.reshape(-1, self.in_features)
        out = self.through_machine(flat, flat @ self.weight.t(), self.program)
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, machine={self.machine!r}"


class AnalogConv2d(_OnMachine):
    """An nn.Conv2d whose product runs on the simulated machine: the convolution compiled as the IR's
    Conv2d (channels last, each output position's patch through the kernel matrix on the optics), the
    zero padding applied digitally before it, the bias after the ADC; straight-through backward; the
    input range as AnalogLinear's. Compiled per input size (H, W)."""

    def __init__(self, conv, machine):
        super().__init__(machine, "AnalogConv2d")
        self.in_channels, self.out_channels, self.kernel_size = conv.in_channels, conv.out_channels, tuple(conv.kernel_size)
        self.stride, self.padding = conv.stride[0], tuple(conv.padding)
        self.weight = nn.Parameter(conv.weight.detach().clone())
        self.bias = nn.Parameter(conv.bias.detach().clone()) if conv.bias is not None else None

    @staticmethod
    def unsupported(conv):
        """Why an nn.Conv2d cannot run as the IR's Conv2d ("" when it can)."""
        why = []
        if conv.groups != 1:
            why.append(f"groups {conv.groups}")
        if tuple(conv.dilation) != (1, 1):
            why.append(f"dilation {conv.dilation}")
        if conv.stride[0] != conv.stride[1]:
            why.append(f"stride {conv.stride}")
        if isinstance(conv.padding, str) or conv.padding_mode != "zeros":
            why.append(f"padding {conv.padding!r} ({conv.padding_mode})")
        return ", ".join(why)

    def program(self, H, W):
        """This layer's convolution compiled for its machine at its input range, for images of H x W."""
        cin, cout, k, s = self.in_channels, self.out_channels, self.kernel_size, self.stride
        return self.machine.compiled(("conv2d", cin, cout, k, s, H, W), lambda: nn.Sequential(nn.Conv2d(cin, cout, k, stride=s, bias=False).double()),
                                     (1, cin, H, W), {"0.weight": self.weight.detach().cpu().double().permute(0, 2, 3, 1).numpy()},
                                     self.calibration((1, H, W, cin)), owner=self)

    def forward(self, x):
        ph, pw = self.padding
        xp = F.pad(x, (pw, pw, ph, ph)) if ph or pw else x
        out = self.through_machine(xp, F.conv2d(xp, self.weight, None, self.stride), lambda: self.program(xp.shape[2], xp.shape[3]),
                                   channels_last=True)
        return out if self.bias is None else out + self.bias.view(1, -1, 1, 1)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"bias={self.bias is not None}, machine={self.machine!r}")


def convert(module, machine, per_layer=None):
    """Replace every nn.Linear of module by an AnalogLinear and every nn.Conv2d by an AnalogConv2d on
    machine (per_layer: {qualified name: Machine} for layers that run elsewhere); returns the module
    (changed in place), as aihwkit's convert_to_analog. A module that is itself one such layer is
    returned converted. A Conv2d the IR cannot run (groups, dilation, other padding modes) stays
    digital, named in a warning."""
    per_layer = dict(per_layer or {})

    def analog(sub, name):
        m = per_layer.pop(name, machine)
        if isinstance(sub, nn.Linear):
            return AnalogLinear.from_linear(sub, m)
        if isinstance(sub, nn.Conv2d):
            why = AnalogConv2d.unsupported(sub)
            if not why:
                return AnalogConv2d(sub, m)
            warnings.warn(f"convert: Conv2d '{name}' stays digital: {why}", RuntimeWarning, stacklevel=3)
        return None

    if isinstance(module, (nn.Linear, nn.Conv2d)):
        return analog(module, "") or module
    for name, child in list(module.named_modules()):
        for attr, sub in list(child.named_children()):
            full = f"{name}.{attr}" if name else attr
            if isinstance(sub, (nn.Linear, nn.Conv2d)):
                new = analog(sub, full)
                if new is not None:
                    setattr(child, attr, new)
    if per_layer:
        raise aocsim.Error(f"convert: per_layer names no nn.Linear or nn.Conv2d of the module: {', '.join(sorted(per_layer))}")
    return module
