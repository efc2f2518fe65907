#include "sim/h5file.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>

#include "sim/error.hpp"
#include "sim/files.hpp"

namespace aoc {

namespace fs = std::filesystem;

H5::H5File open_h5_read(const std::string& path) {
  H5::Exception::dontPrint();
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(path + ": no such file");
  if (fs::is_directory(path, ec) || !std::ifstream(path)) throw Error(path + ": cannot read (a directory or not readable)");
  if (H5Fis_hdf5(path.c_str()) <= 0) throw Error(path + ": not an HDF5 file");
  try {
    return H5::H5File(path, H5F_ACC_RDONLY);
  } catch (const H5::Exception& e) {
    throw Error(path + ": cannot open as HDF5 (" + e.getDetailMsg() + ")");
  }
}

const H5::DSetCreatPropList& untimed_dataset() {
  static const H5::DSetCreatPropList pl = [] {
    H5::DSetCreatPropList p;
    H5Pset_obj_track_times(p.getId(), false);
    return p;
  }();
  return pl;
}

H5::Group create_group(H5::Group& where, const std::string& name) {
  const hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
  H5Pset_obj_track_times(gcpl, false);
  const hid_t id = H5Gcreate2(where.getId(), name.c_str(), H5P_DEFAULT, gcpl, H5P_DEFAULT);
  H5Pclose(gcpl);
  if (id < 0) throw H5::GroupIException("create_group", "cannot create group " + name);
  H5::Group g(id);  // takes its own reference
  H5Gclose(id);
  return g;
}

std::vector<char> h5_image(const std::string& path, const std::function<void(H5::H5File&)>& fill) {
  H5::Exception::dontPrint();
  // Each image its own name: HDF5 refuses to create a file of a name it has open (a program being
  // read while its example input is written).
  static std::atomic<unsigned long long> images{0};
  const std::string name = "aoc-image-" + std::to_string(++images);
  try {
    H5::FileAccPropList fapl;
    fapl.setCore(std::size_t(1) << 20, false);  // in memory, grown by 1 MiB, no backing file
    H5::H5File f(name, H5F_ACC_TRUNC, H5::FileCreatPropList::DEFAULT, fapl);
    fill(f);
    f.flush(H5F_SCOPE_GLOBAL);
    const ssize_t n = H5Fget_file_image(f.getId(), nullptr, 0);
    if (n < 0) throw Error(path + ": write failed (HDF5 could not give the file's bytes)");
    std::vector<char> bytes(static_cast<std::size_t>(n));
    if (H5Fget_file_image(f.getId(), bytes.data(), bytes.size()) != n) throw Error(path + ": write failed (HDF5 could not give the file's bytes)");
    f.close();
    return bytes;
  } catch (const H5::Exception& e) {
    throw Error(path + ": write failed (" + e.getDetailMsg() + ")");
  } catch (const std::bad_alloc&) {
    throw Error(path + ": write failed (the file does not fit in this machine's memory)");
  }
}

void write_h5_atomic(const std::string& path, const std::function<void(H5::H5File&)>& fill) {
  const std::vector<char> bytes = h5_image(path, fill);
  write_bytes_atomic(path, bytes.data(), bytes.size());
}

}  // namespace aoc

namespace aoc {

namespace {

// A dataset's or an attribute's type and dataspace (hid_t, closed by the holder).
struct Ids {
  hid_t type = -1, space = -1;
  bool attribute = false;
  Ids(const H5::H5Location& o, const std::string& where) {
    const hid_t id = o.getId();
    attribute = H5Iget_type(id) == H5I_ATTR;
    if (!attribute && H5Iget_type(id) != H5I_DATASET) throw Error(where + ": not a dataset or an attribute");
    type = attribute ? H5Aget_type(id) : H5Dget_type(id);
    space = attribute ? H5Aget_space(id) : H5Dget_space(id);
    if (type < 0 || space < 0) {
      close();
      throw Error(where + ": cannot read its type or shape");
    }
  }
  ~Ids() { close(); }
  void close() {
    if (type >= 0) H5Tclose(type);
    if (space >= 0) H5Sclose(space);
    type = space = -1;
  }
  Ids(const Ids&) = delete;
  Ids& operator=(const Ids&) = delete;
};

void read_into(const H5::H5Location& o, bool attribute, hid_t mem, void* buf, const std::string& where) {
  const herr_t e = attribute ? H5Aread(o.getId(), mem, buf) : H5Dread(o.getId(), mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
  if (e < 0) throw Error(where + ": cannot read its values (a type HDF5 cannot convert, or a damaged file)");
}

std::string class_text(H5T_class_t c) {
  switch (c) {
    case H5T_INTEGER: return "integers";
    case H5T_FLOAT: return "floating-point numbers";
    case H5T_STRING: return "strings";
    case H5T_COMPOUND: return "a compound type";
    case H5T_ARRAY: return "an array type";
    case H5T_VLEN: return "a variable-length sequence type";
    default: return "a type aoc does not read";
  }
}

H5Extent extent_of(const Ids& ids, const std::string& where, int max_rank) {
  H5Extent e;
  e.type_class = H5Tget_class(ids.type);
  const H5S_class_t sc = H5Sget_simple_extent_type(ids.space);
  if (sc == H5S_NULL) {
    e.count = 0;
    return e;
  }
  if (sc != H5S_SCALAR && sc != H5S_SIMPLE) throw Error(where + ": not a simple dataspace");
  const int rank = H5Sget_simple_extent_ndims(ids.space);
  if (rank < 0) throw Error(where + ": cannot read its shape");
  if (rank > max_rank)
    throw Error(where + ": expected " + (max_rank == 0 ? std::string("one value") : "at most " + std::to_string(max_rank) + " dimension(s)") +
                ", got " + std::to_string(rank) + " dimensions");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(ids.space, dims.data(), nullptr) < 0) throw Error(where + ": cannot read its shape");
  const auto too_many = [&] {
    std::string text;
    for (hsize_t d : dims) text += (text.empty() ? "" : ", ") + std::to_string(d);
    return Error(where + ": shape [" + text + "] has more than 2^40 elements");
  };
  for (hsize_t d : dims) {
    e.dims.push_back(d);
    if (d != 0 && e.count > kMaxH5Elements / d) throw too_many();
    e.count *= d;
  }
  if (e.count > kMaxH5Elements) throw too_many();
  return e;
}

// What a read would take must be in the file: `count` elements of the file type's size, against the
// file's size (uncompressed layouts hold their bytes; a compressed chunked one at most about a
// thousandfold, deflate's limit). A damaged header that declares gigabytes is refused before any is
// allocated.
void check_stored(const H5::H5Location& o, const Ids& ids, std::uint64_t count, const std::string& where) {
  const std::size_t size = H5Tget_size(ids.type);
  if (size == 0) throw Error(where + ": a type of size 0");
  if (count > kMaxH5Elements / size) throw Error(where + ": more than 2^40 bytes");
  const std::uint64_t need = count * size;
  hsize_t file_bytes = 0;
  const hid_t file = H5Iget_file_id(o.getId());
  if (file < 0) return;
  const herr_t got = H5Fget_filesize(file, &file_bytes);
  H5Fclose(file);
  if (got < 0) return;
  std::uint64_t room = file_bytes;
  if (!ids.attribute) {
    const hid_t dcpl = H5Dget_create_plist(o.getId());
    if (dcpl >= 0) {
      if (H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_nfilters(dcpl) > 0) room = file_bytes * 1100;
      H5Pclose(dcpl);
    }
  }
  if (need > room)
    throw Error(where + ": declares " + std::to_string(need) + " bytes of data, more than the file's " + std::to_string(file_bytes) +
                " bytes hold (a damaged file?)");
}

template <class V>
void allocate(V& v, std::uint64_t n, const std::string& where) {
  try {
    v.resize(static_cast<std::size_t>(n));
  } catch (const std::bad_alloc&) {
    throw Error(where + ": " + std::to_string(n) + " values do not fit in this machine's memory");
  }
}

std::vector<std::string> read_strings(const H5::H5Location& o, const std::string& where, int max_rank) {
  const Ids ids(o, where);
  const H5Extent e = extent_of(ids, where, max_rank);
  if (e.type_class != H5T_STRING) throw Error(where + ": expected text, got " + class_text(e.type_class));
  if (H5Tis_variable_str(ids.type) != 0)
    throw Error(where + ": variable-length strings, which aoc does not read (HDF5 can crash on a damaged one); aoc writes fixed-length "
                        "ones: write the file again with this aoc");
  std::vector<std::string> out;
  if (e.count == 0) return out;
  check_stored(o, ids, e.count, where);
  const std::size_t size = H5Tget_size(ids.type);
  if (size == 0 || e.count > kMaxH5Elements / size) throw Error(where + ": more than 2^40 bytes of text");
  std::vector<char> buf;
  allocate(buf, e.count * size, where);
  const hid_t mem = H5Tcopy(H5T_C_S1);
  H5Tset_size(mem, size);
  H5Tset_cset(mem, H5Tget_cset(ids.type));
  // NULLPAD: the file's bytes as they are. The default (NULLTERM) keeps room for a terminator and
  // so dropped the last character of a string that fills its size (h5py's fixed-length strings).
  H5Tset_strpad(mem, H5T_STR_NULLPAD);
  try {
    read_into(o, ids.attribute, mem, buf.data(), where);
  } catch (...) {
    H5Tclose(mem);
    throw;
  }
  H5Tclose(mem);
  for (std::uint64_t i = 0; i < e.count; ++i) {
    const char* s = buf.data() + i * size;
    out.emplace_back(s, strnlen(s, size));  // padded with NULs, or filling the whole size unterminated
  }
  return out;
}

// A fixed-length UTF-8 string type of `size` bytes (at least 1).
H5::StrType text_type(std::size_t size) {
  H5::StrType t(H5::PredType::C_S1, std::max<std::size_t>(1, size));
  t.setCset(H5T_CSET_UTF8);
  return t;
}

}  // namespace

std::vector<double> h5_numbers(const H5::H5Location& object, const std::string& where, int max_rank, H5Extent* extent) {
  const Ids ids(object, where);
  const H5Extent e = extent_of(ids, where, max_rank);
  if (e.type_class != H5T_INTEGER && e.type_class != H5T_FLOAT) throw Error(where + ": expected numbers, got " + class_text(e.type_class));
  check_stored(object, ids, e.count, where);
  std::vector<double> v;
  allocate(v, e.count, where);
  if (!v.empty()) read_into(object, ids.attribute, H5T_NATIVE_DOUBLE, v.data(), where);
  if (extent) *extent = e;
  return v;
}

std::vector<std::uint64_t> h5_u64s(const H5::H5Location& object, const std::string& where) {
  const Ids ids(object, where);
  const H5Extent e = extent_of(ids, where, 1);
  if (e.type_class != H5T_INTEGER) throw Error(where + ": expected integers, got " + class_text(e.type_class));
  check_stored(object, ids, e.count, where);
  std::vector<std::uint64_t> v;
  allocate(v, e.count, where);
  if (v.empty()) return v;
  if (H5Tget_sign(ids.type) == H5T_SGN_NONE) {
    read_into(object, ids.attribute, H5T_NATIVE_UINT64, v.data(), where);
    return v;
  }
  // a signed column, read once as signed: no negative values
  read_into(object, ids.attribute, H5T_NATIVE_INT64, v.data(), where);
  for (std::uint64_t& x : v) {
    std::int64_t s;
    std::memcpy(&s, &x, sizeof s);
    if (s < 0) throw Error(where + ": negative value " + std::to_string(s) + " (expected counts or indices)");
  }
  return v;
}

std::string h5_string(const H5::H5Location& object, const std::string& where) {
  const std::vector<std::string> v = read_strings(object, where, 1);
  if (v.size() != 1) throw Error(where + ": expected one text, got " + std::to_string(v.size()));
  return v[0];
}

std::vector<std::string> h5_strings(const H5::H5Location& object, const std::string& where) { return read_strings(object, where, 1); }

void h5_put_text_attr(H5::H5Object& object, const std::string& name, const std::string& text) {
  const H5::StrType t = text_type(text.size());
  object.createAttribute(name, t, H5::DataSpace(H5S_SCALAR)).write(t, text);
}

void h5_put_text(H5::Group& group, const std::string& name, const std::string& text) {
  const H5::StrType t = text_type(text.size());
  group.createDataSet(name, t, H5::DataSpace(H5S_SCALAR), untimed_dataset()).write(text, t);
}

void h5_put_texts(H5::Group& group, const std::string& name, const std::vector<std::string>& texts) {
  std::size_t size = 1;
  for (const std::string& s : texts) size = std::max(size, s.size());
  std::vector<char> buf(texts.size() * size, '\0');
  for (std::size_t i = 0; i < texts.size(); ++i) std::memcpy(buf.data() + i * size, texts[i].data(), texts[i].size());
  const hsize_t n = texts.size();
  const H5::StrType t = text_type(size);
  H5::DataSet d = group.createDataSet(name, t, H5::DataSpace(1, &n), untimed_dataset());
  if (n) d.write(buf.data(), t);
}

}  // namespace aoc
