// Opening and writing HDF5 files with this project's rules: one-line errors naming the file, HDF5's
// own error printing off, and outputs written to a temporary file renamed into place.
#pragma once
#include <H5Cpp.h>

#include <functional>
#include <string>

namespace aoc {

// Opens an existing file for reading; the checks come first so HDF5 never gets to complain.
H5::H5File open_h5_read(const std::string& path);

// Writes a file through `fill` into a temporary file next to `path`, then renames it into place;
// on any failure the temporary file is removed and nothing appears at `path`.
void write_h5_atomic(const std::string& path, const std::function<void(H5::H5File&)>& fill);

// Datasets and groups created without timestamps (HDF5 stamps every object it creates by default),
// so that the same content gives the same bytes: every writer of aoc creates through these.
const H5::DSetCreatPropList& untimed_dataset();
H5::Group create_group(H5::Group& where, const std::string& name);

}  // namespace aoc
