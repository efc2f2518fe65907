// HDF5 weights: read_weights_h5 / write_weights_h5 (declared in compiler/graph_json.hpp).
#include <H5Cpp.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include "compiler/graph_json.hpp"
#include "sim/error.hpp"
#include "sim/h5file.hpp"

namespace aoc::ir {

namespace {

namespace fs = std::filesystem;

Tensor read_dataset(const H5::DataSet& d, const std::string& where) {
  H5Extent e;
  Tensor t;
  t.data = h5_numbers(d, where, 32, &e);
  for (std::uint64_t v : e.dims) t.shape.push_back(static_cast<std::int64_t>(v));  // each at most 2^40 (h5_numbers)
  for (std::size_t i = 0; i < t.data.size(); ++i)
    if (!std::isfinite(t.data[i])) throw Error(where + ": NaN or infinite value at element " + std::to_string(i));
  return t;
}

// Every dataset under group g, depth first, in HDF5's (alphabetical) order; a hard-link cycle
// (a group that contains itself) stops at the depth limit instead of recursing for ever.
void walk(const H5::Group& g, const std::string& prefix, const std::string& path, WeightStore& out, int depth = 0) {
  if (depth > 64) throw Error(path + ": /" + prefix.substr(0, 60) + "...: groups nested deeper than 64 (a link cycle?)");
  const hsize_t n = g.getNumObjs();
  for (hsize_t i = 0; i < n; ++i) {
    const std::string name = g.getObjnameByIdx(i);
    const std::string full = prefix.empty() ? name : prefix + "/" + name;
    const std::string where = path + ": /" + full;
    H5O_type_t type;
    try {
      type = g.childObjType(name);
    } catch (const H5::Exception& e) {
      throw Error(where + ": cannot read (" + e.getDetailMsg() + ")");
    }
    if (type == H5O_TYPE_GROUP) {
      walk(g.openGroup(name), full, path, out, depth + 1);
    } else if (type == H5O_TYPE_DATASET) {
      try {
        out[full] = read_dataset(g.openDataSet(name), where);
      } catch (const H5::Exception& e) {
        throw Error(where + ": cannot read as a dataset (" + e.getDetailMsg() + ")");
      }
    }
  }
}

}  // namespace

WeightStore read_weights_h5(const std::string& path, const std::string& group) {
  const H5::H5File f = open_h5_read(path);
  WeightStore w;
  try {
    if (H5Lexists(f.getId(), group.c_str(), H5P_DEFAULT) <= 0 && group != "/") throw Error(path + ": " + group + ": missing");
    walk(f.openGroup(group), group == "/" ? "" : group.substr(1), path, w);
  } catch (const H5::Exception& e) {
    throw Error(path + ": cannot read (" + e.getDetailMsg() + ")");
  }
  return w;
}

namespace {

// One float64 dataset per tensor produce hands over, into f.
void fill_weights(H5::H5File& f, const std::string& path, const std::function<void(const AddWeight& add)>& produce) {
  const H5::DSetCreatPropList& dcpl = untimed_dataset();
  produce([&](const std::string& name, const Tensor& t) {
    if (name.empty() || name.front() == '/' || name.back() == '/')
      throw Error(path + ": weight \"" + name + "\": not a valid dataset name");
    for (std::int64_t d : t.shape)
      if (d < 0) throw Error(path + ": weight \"" + name + "\": negative dimension");
    if (static_cast<std::int64_t>(t.data.size()) != t.size())
      throw Error(path + ": weight \"" + name + "\": " + std::to_string(t.data.size()) + " values for a shape of " +
                  std::to_string(t.size()));
    const std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
    // the groups a "/" in the name asks for, made first (untimed), as HDF5's intermediate groups are not
    for (std::size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1))
      if (H5Lexists(f.getId(), name.substr(0, slash).c_str(), H5P_DEFAULT) <= 0) create_group(f, name.substr(0, slash));
    H5::DataSet d = f.createDataSet(name, H5::PredType::IEEE_F64LE, H5::DataSpace(static_cast<int>(dims.size()), dims.data()), dcpl);
    if (!t.data.empty()) d.write(t.data.data(), H5::PredType::NATIVE_DOUBLE);
  });
}

}  // namespace

void write_weights_h5(const std::string& path, const std::function<void(const AddWeight& add)>& produce) {
  write_h5_atomic(path, [&](H5::H5File& f) { fill_weights(f, path, produce); });
}

void write_weights_h5(const std::string& path, const WeightStore& weights) {
  write_weights_h5(path, [&](const AddWeight& add) {
    for (const auto& [name, t] : weights) add(name, t);
  });
}

std::vector<char> weights_h5_image(const std::string& path, const std::function<void(const AddWeight& add)>& produce) {
  return h5_image(path, [&](H5::H5File& f) { fill_weights(f, path, produce); });
}

std::vector<char> weights_h5_image(const std::string& path, const WeightStore& weights) {
  return weights_h5_image(path, [&](const AddWeight& add) {
    for (const auto& [name, t] : weights) add(name, t);
  });
}

}  // namespace aoc::ir
