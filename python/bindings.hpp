// The parts of the Python module `aoc._aoc`, one per area (python/module.cpp puts them together).
#pragma once
#include <pybind11/pybind11.h>

namespace aoc::python {

void bind_loop(pybind11::module_& m);     // aoc.solve: the loop of `aoc run` (bind_loop.cpp)
void bind_program(pybind11::module_& m);  // graphs, programs, backends, check, estimate (bind_program.cpp)

}  // namespace aoc::python
