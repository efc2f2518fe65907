#include "runtime/train/train_checkpoint.hpp"

#include <cmath>
#include <limits>

#include "runtime/io/h5io.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc {

namespace {

constexpr const char* kFormat = "aoc-train-checkpoint";
constexpr const char* kRetinaFormat = "aoc-retina-train-checkpoint";

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

// The params' values and AdamW moments as datasets (param.NAME, adam_m.NAME, adam_v.NAME), the
// optimizer's step counts into the state JSON.
void save_optimizer(const std::vector<ad::Param*>& params, const ad::AdamW& opt, std::vector<H5Array>& arrays, nlohmann::ordered_json& j) {
  const ad::AdamW::Saved s = opt.save(params);
  for (std::size_t i = 0; i < params.size(); ++i) {
    arrays.push_back(array_of("param." + params[i]->name, params[i]->value));
    arrays.push_back(array_of("adam_m." + params[i]->name, s.m[i]));
    arrays.push_back(array_of("adam_v." + params[i]->name, s.v[i]));
  }
  j["adam_t"] = s.t;
  j["adam_steps"] = s.steps;
}

// The state attribute of a checkpoint of `format`, checked against the run's config hash.
nlohmann::ordered_json checkpoint_state(const std::string& path, const std::string& config_hash, const char* format) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(read_h5_attr(path, "state"));
    if (!j.is_object() || j.value("format", "") != format) throw Error(path + ": attribute state: not an aoc " + format);
    if (j.at("config_hash").get<std::string>() != config_hash)
      throw Error(path + ": a checkpoint of another scenario or other options (config hash " + j.at("config_hash").get<std::string>() + ", this one " +
                  config_hash + "): train afresh without --resume, or into another folder");
  } catch (const nlohmann::json::exception& e) {
    throw Error(jsonr::one_line(path + ": attribute state: " + e.what()));
  }
  return j;
}

// Puts the params' values and the optimizer's moments back (save_optimizer's).
void restore_optimizer(const std::string& path, const nlohmann::ordered_json& j, const std::vector<ad::Param*>& params, ad::AdamW& opt) {
  ad::AdamW::Saved s;
  s.steps = j.at("adam_steps").get<long long>();
  s.t = j.at("adam_t").get<std::vector<long long>>();
  if (s.t.size() != params.size())
    throw Error(path + ": attribute state: adam_t has " + std::to_string(s.t.size()) + " entries, the model " + std::to_string(params.size()) +
                " params");
  for (ad::Param* p : params) {
    s.m.push_back(matrix_of(path, "adam_m." + p->name, p->value));
    s.v.push_back(matrix_of(path, "adam_v." + p->name, p->value));
  }
  for (ad::Param* p : params) p->value = matrix_of(path, "param." + p->name, p->value);
  opt.restore(params, s);
}

}  // namespace

void write_train_checkpoint(const std::string& path, models::SequenceModel& m, const models::TrainState& state,
                            const std::string& config_hash, const nlohmann::ordered_json& log) {
  std::vector<H5Array> arrays;
  nlohmann::ordered_json j{{"format", kFormat}, {"version", 1}, {"tool_version", AOC_VERSION}, {"config_hash", config_hash}, {"step", state.step}};
  const std::vector<ad::Param*> params = m.params();
  save_optimizer(params, state.opt, arrays, j);
  for (std::size_t i = 0; i < state.average.size(); ++i) arrays.push_back(array_of("average." + params[i]->name, state.average[i]));
  j["averaged"] = !state.average.empty();
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
  j["noise_draws"] = std::to_string(m.noise_draws());
  j["log"] = rest;
  write_h5_arrays(path, arrays, {}, {{"state", j.dump()}});
}

nlohmann::ordered_json read_train_checkpoint(const std::string& path, models::SequenceModel& m, models::TrainState& state,
                                             const std::string& config_hash) {
  const nlohmann::ordered_json j = checkpoint_state(path, config_hash, kFormat);
  try {
    restore_optimizer(path, j, m.params(), state.opt);
    state.step = j.at("step").get<int>();
    state.average.clear();
    if (j.value("averaged", false))
      for (ad::Param* p : m.params()) state.average.push_back(matrix_of(path, "average." + p->name, p->value));
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

void write_retina_checkpoint(const std::string& path, retina::Model& m, const retina::TrainState& state, const std::string& config_hash) {
  const std::vector<ad::Param*> params = m.params();
  std::vector<H5Array> arrays;
  nlohmann::ordered_json j{{"format", kRetinaFormat}, {"version", 1}, {"tool_version", AOC_VERSION}, {"config_hash", config_hash},
                           {"epoch", state.epoch}};
  save_optimizer(params, state.opt, arrays, j);
  for (std::size_t i = 0; i < state.best.size(); ++i) arrays.push_back(array_of("best." + params[i]->name, state.best[i]));
  nlohmann::ordered_json epochs = nlohmann::ordered_json::array();
  for (const retina::EpochRecord& e : state.result.epochs) epochs.push_back({e.epoch, e.train_nll, e.val_nll, e.val_cc, e.seconds});
  // 0: no epoch scored yet (every score NaN); its held-out NLL is in its epoch record
  j["best_epoch"] = state.best.empty() ? 0 : state.result.best_epoch;
  j["epochs"] = std::move(epochs);
  write_h5_arrays(path, arrays, {}, {{"state", j.dump()}});
}

void read_retina_checkpoint(const std::string& path, retina::Model& m, retina::TrainState& state, const std::string& config_hash) {
  const nlohmann::ordered_json j = checkpoint_state(path, config_hash, kRetinaFormat);
  const std::vector<ad::Param*> params = m.params();
  try {
    restore_optimizer(path, j, params, state.opt);
    state.epoch = j.at("epoch").get<int>();
    state.result.epochs.clear();
    for (const auto& row : j.at("epochs")) {
      retina::EpochRecord e;
      e.epoch = row.at(0).get<int>(), e.train_nll = row.at(1).get<double>(), e.val_nll = row.at(2).get<double>();
      e.val_cc = row.at(3).get<double>(), e.seconds = row.at(4).get<double>();
      state.result.epochs.push_back(e);
    }
    if (static_cast<int>(state.result.epochs.size()) != state.epoch)
      throw Error(path + ": attribute state: " + std::to_string(state.result.epochs.size()) + " epoch records after epoch " + std::to_string(state.epoch));
    state.best.clear();
    state.best_nll = std::numeric_limits<double>::infinity();
    state.result.best_epoch = 0;
    if (const int b = j.at("best_epoch").get<int>(); b != 0) {
      if (b < 1 || b > state.epoch) throw Error(path + ": attribute state: best_epoch " + std::to_string(b) + " after epoch " + std::to_string(state.epoch));
      state.result.best_epoch = b;
      state.best_nll = state.result.epochs[static_cast<std::size_t>(b - 1)].val_nll;
      for (ad::Param* p : params) state.best.push_back(matrix_of(path, "best." + p->name, p->value));
    }
    state.seconds_before = state.result.epochs.empty() ? 0 : state.result.epochs.back().seconds;
  } catch (const nlohmann::json::exception& e) {
    throw Error(jsonr::one_line(path + ": attribute state: " + e.what()));
  }
}

}  // namespace aoc
