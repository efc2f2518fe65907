"""aocsim.torch: the fixed-point Function's gradients, the AOC layer, the noisy machine in training."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="aocsim.torch needs PyTorch (python3-torch)")
import aocsim  # noqa: E402
from aocsim.torch import AOCLayer, FixedPoint, Machine, loop_step  # noqa: E402


def exact():
    return Machine(mode="ideal", precision="f64", rule="relative", tol=1e-15, max_iter=3000)


def problem(n=8, batch=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = 0.5 * torch.randn(batch, n, generator=g, dtype=torch.float64)
    W = 0.8 * (2 * torch.rand(n, n, generator=g, dtype=torch.float64) - 1) / math.sqrt(n)
    b = 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    a = torch.full((n,), 0.3, dtype=torch.float64)
    probe = torch.randn(batch, n, generator=g, dtype=torch.float64)
    return [x, W, b, a], probe


def loss_of(machine, backward, steps=200, damping=1.0):
    def loss(x, W, b, a, probe):
        return (FixedPoint.apply(x, W, b, a, machine, backward, steps, damping, 1e-14) * probe).sum()
    return loss


def test_the_forward_is_the_machines_fixed_point():
    (x, W, b, a), _ = problem()
    z = FixedPoint.apply(x, W, b, a, exact())
    assert torch.allclose(loop_step(z, x, W, b, a), z, atol=1e-13)
    r = aocsim.solve(W.numpy(), x.numpy(), b.numpy(), mode="ideal", alpha=a.numpy(), beta=[1.0], precision="f64", rule="relative",
                  tol=1e-15, max_iter=3000)
    assert np.array_equal(z.numpy(), r.readout)


def test_implicit_gradients_match_finite_differences():
    params, probe = problem()
    loss = loss_of(exact(), "implicit")
    leaves = [p.clone().requires_grad_(True) for p in params]
    grads = torch.autograd.grad(loss(*leaves, probe), leaves)
    eps = 1e-6
    g = torch.Generator().manual_seed(1)
    for k, p in enumerate(params):
        for _ in range(4):
            i = int(torch.randint(p.numel(), (1,), generator=g))
            up, down = [q.clone() for q in params], [q.clone() for q in params]
            up[k].view(-1)[i] += eps
            down[k].view(-1)[i] -= eps
            fd = (loss(*up, probe) - loss(*down, probe)).item() / (2 * eps)
            assert grads[k].view(-1)[i].item() == pytest.approx(fd, rel=1e-5, abs=1e-8)


def test_the_phantom_gradient_tends_to_the_implicit_one_with_more_steps():
    params, probe = problem()
    m = exact()

    def grad(backward, steps, damping):
        leaves = [p.clone().requires_grad_(True) for p in params]
        return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss_of(m, backward, steps, damping)(*leaves, probe), leaves)])

    implicit = grad("implicit", 200, 1.0)
    long, short = grad("phantom", 100, 1.0), grad("phantom", 5, 0.5)
    assert torch.allclose(long, implicit, rtol=1e-8, atol=1e-10)
    assert torch.nn.functional.cosine_similarity(short, implicit, dim=0) > 0.9
    assert not torch.allclose(short, implicit, rtol=1e-3)


def test_an_unknown_backward_is_an_error():
    (x, W, b, a), _ = problem()
    with pytest.raises(aocsim.Error, match="backward"):
        FixedPoint.apply(x, W, b, a, exact(), "adjoint")


def test_a_width_past_the_machines_channels_is_an_error_naming_it():
    with pytest.raises(aocsim.Error, match="width 64: more than the 48 channels of aoc-48"):
        AOCLayer(64, Machine("aoc-48"))
    (x, W, b, a), _ = problem(n=20)
    with pytest.raises(aocsim.Error, match="width 20: more than the 16 channels"):
        Machine("aoc-16").solve(x, W, b, a)
    AOCLayer(48, Machine("aoc-48"))  # the machine's own width is fine


def test_solves_that_do_not_converge_are_counted_in_a_warning():
    (x, W, b, a), _ = problem()
    short = Machine(mode="ideal", precision="f64", rule="relative", tol=1e-15, max_iter=2)
    with pytest.warns(RuntimeWarning, match="3 of 3 solves on .* did not converge within 2 iterations"):
        short.solve(x, W, b, a)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exact().solve(x, W, b, a)  # converged: no warning


def test_a_noisy_machine_draws_new_noise_each_call_unless_told_not_to():
    (x, W, b, a), _ = problem(n=16)
    fresh, same = Machine("aoc-16", noise=True, seed=5), Machine("aoc-16", noise=True, seed=5, advance_seed=False)
    assert not torch.equal(fresh.solve(x, W, b, a), fresh.solve(x, W, b, a))
    assert torch.equal(same.solve(x, W, b, a), same.solve(x, W, b, a))
    again = Machine("aoc-16", noise=True, seed=5)
    assert torch.equal(again.solve(x, W, b, a), Machine("aoc-16", noise=True, seed=5).solve(x, W, b, a))


def test_a_program_seed_holds_the_chip_while_the_read_noise_is_fresh():
    (x, W, b, a), _ = problem(n=16)
    pattern_only = {"noise.thermal_sigma": 0, "noise.photons_per_sample": 0, "noise.receiver_noise_density": 0, "noise.rin_sigma": 0,
                    "noise.drift_sigma": 0, "noise.flicker_sigma": 0}
    chip = Machine("aoc-16", set=pattern_only, noise=True, seed=5, program_seed=9)
    assert torch.equal(chip.solve(x, W, b, a), chip.solve(x, W, b, a))  # the same chip, its pattern alone
    new_chips = Machine("aoc-16", set=pattern_only, noise=True, seed=5)
    assert not torch.equal(new_chips.solve(x, W, b, a), new_chips.solve(x, W, b, a))
    keyed = Machine("aoc-16", set=pattern_only, noise=True, seed=9, advance_seed=False)  # program seed 9 is noise seed 9's chip
    assert torch.equal(chip.solve(x, W, b, a), keyed.solve(x, W, b, a))
    read = Machine("aoc-16", noise=True, seed=5, program_seed=9)  # the same chip under fresh read noise
    assert not torch.equal(read.solve(x, W, b, a), read.solve(x, W, b, a))


def test_on_the_calibrated_machine_the_layer_means_its_effective_weights_beta_W():
    # the machine's product is (s/N) t W / max|W|: the layer sets s = N max|beta W|, so W and beta
    # matter only through beta W, and beta is not lost to the normalisation
    machine = Machine("aoc-16", precision="f64", rule="relative", tol=1e-12, max_iter=500)
    a, b = AOCLayer(16, machine, dtype=torch.float64), AOCLayer(16, machine, dtype=torch.float64)
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        b.weight.mul_(2.0)
        b.beta.mul_(0.5)
    x = 0.3 * torch.randn(4, 16, dtype=torch.float64)
    assert torch.allclose(a(x), b(x), atol=1e-12)
    with torch.no_grad():
        b.beta.mul_(0.5)
    assert not torch.allclose(a(x), b(x), atol=1e-3)


def test_a_layer_trains_through_the_noisy_quantized_machine():
    torch.manual_seed(0)
    machine = Machine("aoc-16", noise=True, quantize=True, seed=3)
    layer = AOCLayer(16, machine)
    x = 0.5 * torch.randn(32, 16)
    target = torch.tanh(x @ torch.randn(16, 16) / 4)
    # lr 0.005: at 0.02 the loss bottoms out after ~20 steps and climbs again (at 1e5 photons as at
    # the 6.3e7 the file derives), so a 40-step window judged the overshoot, not the training
    opt = torch.optim.Adam(layer.parameters(), lr=0.005)
    losses = []
    for _ in range(40):
        opt.zero_grad()
        loss = ((layer(x) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(p.grad is not None for p in layer.parameters())
    assert np.mean(losses[-5:]) < 0.7 * np.mean(losses[:5])


def test_hardware_aware_training_beats_plain_training_on_the_noisy_machine():
    # scripts/hardware-aware-training's models at one training seed and its 300 steps (docs/python.md;
    # at 200 the machine-trained model had not yet pulled away: 0.953 against 0.941)
    import importlib.machinery
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "hardware-aware-training")
    loader = importlib.machinery.SourceFileLoader("hardware_aware_training", path)
    script = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(script)
    noisy = dict(noise=True, quantize=True)
    x, y = script.data(512, seed=2)
    plain = script.train(Machine(mode="ideal", precision="f64", rule="relative", tol=1e-9, max_iter=500), 300, seed=0)
    aware = script.train(Machine("aoc-16", seed=100, **noisy), 300, seed=0)
    judge = [Machine("aoc-16", seed=10_000 + s, advance_seed=False, **noisy) for s in range(2)]
    on_machine = {name: np.mean([script.accuracy(m, j, x, y) for j in judge]) for name, m in (("plain", plain), ("aware", aware))}
    assert on_machine["aware"] > on_machine["plain"] + 0.02


def test_a_contraction_bound_keeps_the_exact_loop_converging_where_the_plain_layer_warns():
    import warnings
    torch.manual_seed(3)
    x = torch.randn(64, 16, dtype=torch.float64)
    plain = AOCLayer(16, Machine(mode="ideal", precision="f64", rule="relative", tol=1e-9, max_iter=60), alpha=0.5, dtype=torch.float64)
    bound = AOCLayer(16, Machine(mode="ideal", precision="f64", rule="relative", tol=1e-9, max_iter=60), alpha=0.5, dtype=torch.float64,
                     contraction=0.9)
    with torch.no_grad():
        plain.weight.mul_(40)  # far from a contraction: the loop wanders
        bound.weight.copy_(plain.weight)
    with pytest.warns(RuntimeWarning, match="did not converge"):
        plain(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = bound(x)
    Wl = bound.loop_weight().detach()
    assert float(torch.linalg.matrix_norm(Wl, ord=2)) == pytest.approx(0.4, rel=1e-9)  # 0.9 - max|alpha|
    # a fixed point of the bounded loop, and the gradient flows through the scaling
    step = 0.5 * y + torch.tanh(y) @ Wl + x + bound.bias.detach()
    assert float((step - y).abs().max()) < 1e-7
    y.sum().backward()
    assert bound.weight.grad is not None and torch.isfinite(bound.weight.grad).all()
    with pytest.raises(aocsim.Error, match="contraction 1.5: give a factor in"):
        AOCLayer(4, contraction=1.5)
    with pytest.raises(aocsim.Error, match="leaves no room under contraction 0.4"):
        AOCLayer(4, contraction=0.4, alpha=0.5)(torch.zeros(1, 4))


def test_a_layer_on_the_compiled_machine_is_what_its_exported_program_computes(tmp_path):
    from torch import nn
    from aocsim.torch import export
    torch.manual_seed(4)
    x = 0.7 * torch.randn(40, 20, dtype=torch.float64)
    for optics, leak in (("measured", 0.0), ("ideal", 0.3)):
        m = Machine("aoc-48", optics=optics, noise=True, quantize=True, precision="f64", seed=3, advance_seed=False)
        layer = AOCLayer(20, m, alpha=leak, dtype=torch.float64)
        with torch.no_grad():
            layer.bias.normal_(0, 0.1)
            y = layer(x).numpy()
        program = export(nn.Sequential(layer), x, tmp_path / f"{optics}.json").compile("aoc-48")
        r = program.run({"input": x.numpy()}, backend="sim", quantize=True, noise=True, ideal_optics=optics == "ideal",
                        precision="f64", seed=3)
        assert np.array_equal(r.outputs[program.outputs[0]], y), optics  # the same machine, bit for bit
        assert m.last_result.fixed_points[0].at_floor.any()  # noisy solves settle at their floor
        exact = AOCLayer(20, alpha=leak, dtype=torch.float64)
        exact.load_state_dict(layer.state_dict())
        assert float(np.abs(y - exact(x).detach().numpy()).max()) > 1e-4  # the machine, not the exact loop
    with pytest.raises(aocsim.Error, match="optics 'real': give"):
        Machine(optics="real")
    with pytest.raises(aocsim.Error, match="mode 'ideal' is the loop core's"):
        Machine(optics="measured", mode="ideal")


def test_the_compiled_layer_is_compiled_again_only_when_its_weights_change():
    m = Machine("aoc-16", optics="measured", precision="f64", max_iter=2)  # what is compiled, not how it converges
    layer = AOCLayer(8, m, alpha=0.0, dtype=torch.float64)
    x = torch.randn(4, 8, dtype=torch.float64)
    import warnings
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        layer(x)
        first = m._compiled[("program", ("loop", 8, False))][-1]
        layer(x)
        assert m._compiled[("program", ("loop", 8, False))][-1] is first
        layer.weight.mul_(0.5)
        layer(x)
        assert m._compiled[("program", ("loop", 8, False))][-1] is not first


def test_a_solve_at_a_time_after_programming_sees_the_drift_grow_back_from_its_zero():
    drift_only = {"noise.thermal_sigma": 0, "noise.rin_sigma": 0, "noise.slm_fixed_pattern_sigma": 0, "noise.photons_per_sample": 0,
                  "noise.flicker_sigma": 0}
    (x, W, b, a), _ = problem(n=16)
    clean = Machine("aoc-16", seed=2).solve(x, W, b, a)

    def off(after, every=None):
        m = Machine("aoc-16", set=drift_only, noise=True, seed=2, advance_seed=False, after_programming_us=after, zero_every_us=every)
        return float((m.solve(x, W, b, a) - clean).abs().max())

    assert off(0.0) < 0.01 * off(None)  # programmed and zeroed at clock 0: the drift of that moment is gone
    assert off(0.0) < off(3e5) < 10 * off(None)  # 0.3 s later it has drifted away from the zero
    assert off(3e5, every=1000.0) < 0.05 * off(3e5)  # zeroed again every millisecond: gone again
    with pytest.raises(aocsim.Error, match="zero_every_us: the zeros sit on the clock"):
        off(None, every=1000.0)
