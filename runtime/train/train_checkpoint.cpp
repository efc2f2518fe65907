#include "runtime/train/train_checkpoint.hpp"

#include <cmath>

#include "runtime/io/h5io.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc {

namespace {

constexpr const char* kFormat = "aoc-train-checkpoint";

H5Array array_of(const std::string& name, const ad::Mat& a) {
  H5Array h{name, {static_cast<std::size_t>(a.rows()), static_cast<std::size_t>(a.cols())}, {}, false};
  h.values.reserve(static_cast<std::size_t>(a.size()));
  for (Eigen::Index r = 0; r < a.rows(); ++r)
    for (Eigen::Index c = 0; c < a.cols(); ++c) h.values.push_back(a(r, c));
  return h;
}

ad::Mat matrix_of(const std::string& path, const std::string& name, const ad::Mat& like) {
  const H5Array h = read_h5_array(path, name);
  if (h.shape.size() != 2 || h.shape[0] != static_cast<std::size_t>(like.rows()) || h.shape[1] != static_cast<std::size_t>(like.cols()))
    throw Error(path + ": /" + name + ": not the model's shape " + ad::shape_of(like) + " (a checkpoint of another model?)");
  ad::Mat a(like.rows(), like.cols());
  std::size_t i = 0;
  for (Eigen::Index r = 0; r < a.rows(); ++r)
    for (Eigen::Index c = 0; c < a.cols(); ++c) {
      const double v = h.values[i++];
      if (!std::isfinite(v)) throw Error(path + ": /" + name + ": NaN or infinite value");
      a(r, c) = v;
    }
  return a;
}

}  // namespace

void write_train_checkpoint(const std::string& path, models::SequenceModel& m, const models::TrainState& state,
                            const std::string& config_hash, const nlohmann::ordered_json& log) {
  const std::vector<ad::Param*> params = m.params();
  const ad::AdamW::Saved s = state.opt.save(params);
  std::vector<H5Array> arrays;
  for (std::size_t i = 0; i < params.size(); ++i) {
    arrays.push_back(array_of("param." + params[i]->name, params[i]->value));
    arrays.push_back(array_of("adam_m." + params[i]->name, s.m[i]));
    arrays.push_back(array_of("adam_v." + params[i]->name, s.v[i]));
  }
  // The loss curve grows with the run: a dataset (an attribute holds at most 64 KiB), the rest of the
  // log in the state attribute.
  nlohmann::ordered_json rest = log;
  if (const auto c = rest.find("loss_curve"); c != rest.end()) {
    H5Array curve{"log.loss_curve", {c->size(), 3}, {}, false};
    for (const auto& row : *c)
      for (const auto& v : row) curve.values.push_back(v.get<double>());
    arrays.push_back(std::move(curve));
    rest.erase(c);
  }
  const nlohmann::ordered_json j{{"format", kFormat},         {"version", 1},
                                 {"tool_version", AOC_VERSION}, {"config_hash", config_hash},
                                 {"step", state.step},        {"adam_t", s.t},
                                 {"adam_steps", s.steps},     {"noise_draws", std::to_string(m.noise_draws())},
                                 {"log", rest}};
  write_h5_arrays(path, arrays, {}, {{"state", j.dump()}});
}

nlohmann::ordered_json read_train_checkpoint(const std::string& path, models::SequenceModel& m, models::TrainState& state,
                                             const std::string& config_hash) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(read_h5_attr(path, "state"));
  } catch (const nlohmann::json::exception& e) {
    throw Error(jsonr::one_line(path + ": attribute state: not JSON (" + e.what() + ")"));
  }
  const std::vector<ad::Param*> params = m.params();
  try {
    if (j.value("format", "") != kFormat) throw Error(path + ": attribute state: not an aoc training checkpoint");
    if (j.at("config_hash").get<std::string>() != config_hash)
      throw Error(path + ": a checkpoint of another scenario (config hash " + j.at("config_hash").get<std::string>() + ", this one " +
                  config_hash + "): train afresh without --resume, or into another folder");
    ad::AdamW::Saved s;
    s.steps = j.at("adam_steps").get<long long>();
    s.t = j.at("adam_t").get<std::vector<long long>>();
    if (s.t.size() != params.size())
      throw Error(path + ": attribute state: adam_t has " + std::to_string(s.t.size()) + " entries, the model " +
                  std::to_string(params.size()) + " params");
    for (ad::Param* p : params) {
      s.m.push_back(matrix_of(path, "adam_m." + p->name, p->value));
      s.v.push_back(matrix_of(path, "adam_v." + p->name, p->value));
    }
    for (ad::Param* p : params) p->value = matrix_of(path, "param." + p->name, p->value);
    state.opt.restore(params, s);
    state.step = j.at("step").get<int>();
    m.set_noise_draws(std::stoull(j.at("noise_draws").get<std::string>()));
    nlohmann::ordered_json log = j.at("log");
    // rows of (step, loss, solve iterations): whole numbers but the loss
    const H5Array curve = read_h5_array(path, "log.loss_curve");
    if (curve.shape.size() != 2 || curve.shape[1] != 3) throw Error(path + ": /log.loss_curve: not rows of (step, loss, solve iterations)");
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (std::size_t r = 0; r < curve.shape[0]; ++r) {
      const double* v = curve.values.data() + 3 * r;
      if (!std::isfinite(v[1]) || v[0] != std::floor(v[0]) || v[2] != std::floor(v[2]) || std::fabs(v[0]) > 1e9 || std::fabs(v[2]) > 1e9)
        throw Error(path + ": /log.loss_curve: row " + std::to_string(r) + " is not (step, loss, solve iterations)");
      rows.push_back({static_cast<long long>(v[0]), v[1], static_cast<long long>(v[2])});
    }
    log["loss_curve"] = std::move(rows);
    return log;
  } catch (const nlohmann::json::exception& e) {
    throw Error(jsonr::one_line(path + ": attribute state: " + e.what()));
  } catch (const std::logic_error& e) {  // stoull
    throw Error(path + ": attribute state: noise_draws: not a count");
  }
}

}  // namespace aoc
