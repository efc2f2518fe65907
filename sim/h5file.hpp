// Opening and writing HDF5 files with this project's rules: one-line errors naming the file, HDF5's
// own error printing off, and outputs written to a temporary file renamed into place.
#pragma once
#include <H5Cpp.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace aoc {

// Opens an existing file for reading; the checks come first so HDF5 never gets to complain.
H5::H5File open_h5_read(const std::string& path);

// The bytes of the HDF5 file `fill` makes, built in memory (HDF5's core driver): HDF5 never writes
// to the disk, whose failures it reports late or not at all (a full disk once left a file of zero
// labels behind a successful exit); the bytes are written by write_bytes_atomic, which checks every
// call. `path` names the file in messages. Holds the file twice in memory at the end (the image and
// its copy).
std::vector<char> h5_image(const std::string& path, const std::function<void(H5::H5File&)>& fill);

// Writes a file through `fill` (h5_image) to a temporary file next to `path`, then renames it into
// place; on any failure the temporary file is removed and what was at `path` is left as it was.
void write_h5_atomic(const std::string& path, const std::function<void(H5::H5File&)>& fill);

// Checked reads of a dataset or an attribute (`where`: "FILE: /NAME" or "FILE: attribute NAME", the
// start of every error). Each checks the type class, the rank and the element count before it
// reads, so a file cannot make a read overrun its buffer (an array where one value is expected, a
// 2-D column, a fixed-length string where a variable one is expected) or ask for more than
// kMaxH5Elements values; every failure is an aoc::Error naming `where`.
constexpr std::uint64_t kMaxH5Elements = std::uint64_t(1) << 40;
struct H5Extent {
  H5T_class_t type_class;
  std::vector<std::uint64_t> dims;  // empty for a scalar
  std::uint64_t count = 1;          // elements
};
// Numbers (integer or floating-point classes), as double, of rank at most max_rank.
std::vector<double> h5_numbers(const H5::H5Location& object, const std::string& where, int max_rank, H5Extent* extent = nullptr);
// Unsigned 64-bit integers of an integer class, rank at most 1.
std::vector<std::uint64_t> h5_u64s(const H5::H5Location& object, const std::string& where);
// One string: a string class (fixed or variable length) holding exactly one element.
std::string h5_string(const H5::H5Location& object, const std::string& where);
// Strings of a string class (fixed or variable length), rank at most 1.
std::vector<std::string> h5_strings(const H5::H5Location& object, const std::string& where);

// Text as aoc writes it: fixed-length UTF-8 strings, never variable-length ones (those live in
// HDF5's global heap, and HDF5 1.10 crashes reading a damaged heap reference, so the reader above
// refuses them). An attribute; a scalar dataset; a 1-D dataset of strings padded to the longest.
void h5_put_text_attr(H5::H5Object& object, const std::string& name, const std::string& text);
void h5_put_text(H5::Group& group, const std::string& name, const std::string& text);
void h5_put_texts(H5::Group& group, const std::string& name, const std::vector<std::string>& texts);

// Datasets and groups created without timestamps (HDF5 stamps every object it creates by default),
// so that the same content gives the same bytes: every writer of aoc creates through these.
const H5::DSetCreatPropList& untimed_dataset();
H5::Group create_group(H5::Group& where, const std::string& name);

}  // namespace aoc
