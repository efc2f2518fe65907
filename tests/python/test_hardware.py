"""aocsim.machines and aocsim.Hardware: the bundled machines, overrides, sections."""
import os

import pytest

import aocsim


def test_machines_lists_the_bundled_ones(cli):
    names = aocsim.machines()
    assert {"aoc-16", "aoc-48", "aoc-scale"} <= set(names)
    listed = cli("hw", "list")
    for n in names:
        assert n in listed


def test_a_bundled_machine_loads_by_name():
    hw = aocsim.Hardware("aoc-48")
    assert hw.name and hw.channels == 48
    assert "noise" in hw.sections


def test_overrides_change_the_value_and_say_so_in_its_source():
    hw = aocsim.Hardware("aoc-48", set={"noise.thermal_sigma": 0.005})
    entry = hw.section("noise")["thermal_sigma"]
    assert entry["value"] == 0.005
    assert aocsim.Hardware("aoc-48").section("noise")["thermal_sigma"]["value"] != 0.005


def test_overrides_stack_later_ones_winning():
    hw = aocsim.Hardware("aoc-48", set=["noise.thermal_sigma=0.004"]).with_overrides({"noise.thermal_sigma": 0.006})
    assert hw.section("noise")["thermal_sigma"]["value"] == 0.006


def test_str_is_the_summary_of_aoc_hw_show(cli):
    assert str(aocsim.Hardware("aoc-16")) == cli("hw", "show", "aoc-16")


def test_an_unknown_section_is_an_error_naming_it():
    with pytest.raises(aocsim.Error, match="nonsense: no such section"):
        aocsim.Hardware("aoc-48").section("nonsense")


@pytest.mark.parametrize("machine, set, message", [
    ("aoc-99", None, "no such hardware file"),
    ("aoc-48", {"noise.no_such_field": 1}, "no_such_field"),
    ("aoc-48", {"converters.adc_bits": 99}, "adc_bits"),
])
def test_bad_machines_and_overrides_are_one_line_errors(machine, set, message):
    with pytest.raises(aocsim.Error, match=message) as e:
        aocsim.Hardware(machine, set=set)
    assert "\n" not in str(e.value)


def test_instruction_sets_name_the_kernel_copy_and_aoc_isa_chooses_it():
    import subprocess
    import sys
    assert aocsim.instruction_sets.startswith("kernels x86-64")
    env = dict(os.environ, AOC_ISA="x86-64")
    out = subprocess.run([sys.executable, "-c", "import aocsim; print(aocsim.instruction_sets)"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("kernels x86-64 (of ")
    env["AOC_ISA"] = "avx9"
    bad = subprocess.run([sys.executable, "-c", "import aocsim"], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "AOC_ISA: unknown instruction set 'avx9'" in bad.stderr


def test_the_package_loads_beside_microsofts_aoc(tmp_path):
    """`aoc` is the import name of Microsoft's digital twin: a stand-in of it loads beside aocsim."""
    import subprocess
    import sys
    (tmp_path / "aoc").mkdir()
    (tmp_path / "aoc" / "__init__.py").write_text("TWIN = True\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    code = "import aoc, aocsim; print(aoc.TWIN, aocsim.Hardware('aoc-16').name)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "aoc-16"]


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAKE_SCALE_HW = os.path.join(ROOT, "scripts", "make-scale-hw")


def test_the_bundled_at_scale_module_is_what_its_generator_writes(tmp_path, cli):  # the generator runs AOC_CLI's `hw new`
    import subprocess, sys
    out = tmp_path / "aoc-scale.json"
    subprocess.run([sys.executable, MAKE_SCALE_HW, "-o", str(out)], check=True)
    with open(os.path.join(ROOT, "scenarios", "hardware", "aoc-scale.json"), encoding="utf-8") as f:
        assert out.read_text(encoding="utf-8") == f.read(), "edit scripts/make-scale-hw, then run it: the JSON is its output"


def test_a_machine_of_256_channels_is_one_command_and_estimates(tmp_path, cli):
    out = tmp_path / "aoc-256.json"
    cli("hw", "new", "aoc-256", "--channels", 256, "-o", out)
    hw = aocsim.Hardware(str(out))
    assert hw.name == "aoc-256" and hw.channels == 256
    assert "stand-in" in hw.to_dict()["description"]
    assert "aoc-256" in cli("estimate", "--hw", out, "--fixed-points", 1000)
