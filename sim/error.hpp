// One error type for everything a user can get wrong: the message is a single line that names the
// file and the field ("aoc-48.json: calibration.fan_in_pos.value: expected 48 numbers, got 47").
#pragma once
#include <stdexcept>
#include <string>

namespace aoc {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace aoc
