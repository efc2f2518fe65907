#include "sim/h5file.hpp"

#include <filesystem>
#include <fstream>
#include <optional>

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

void write_h5_atomic(const std::string& path, const std::function<void(H5::H5File&)>& fill) {
  H5::Exception::dontPrint();
  const fs::path tmp = temp_path_next_to(path);
  std::optional<H5::H5File> f;
  try {
    f.emplace(tmp.string(), H5F_ACC_TRUNC);
  } catch (const H5::Exception&) {
    throw Error(path + ": cannot write (directory missing or not writable)");
  }
  std::error_code ec;
  try {
    fill(*f);
    f->close();
  } catch (const H5::Exception& e) {
    f.reset();
    fs::remove(tmp, ec);
    throw Error(path + ": write failed (" + e.getDetailMsg() + ")");
  } catch (...) {
    f.reset();
    fs::remove(tmp, ec);
    throw;
  }
  rename_into_place(tmp, path);
}

}  // namespace aoc
