// The program's file form (HDF5, docs/program.md). Writing goes through a temporary file renamed
// into place; reading checks the format and runs verify_program, so a damaged or hand-edited
// program is one error line naming the file and the field.
#pragma once
#include <string>

#include "compiler/program.hpp"

namespace aoc::ir {

void write_program_h5(const std::string& path, const Program& p);
Program read_program_h5(const std::string& path);
// Whether the file is an HDF5 file whose root says format = "aoc-program" (no error otherwise).
bool is_program_h5(const std::string& path);

}  // namespace aoc::ir
