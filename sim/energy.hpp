// The energy model of a machine, Accelergy-style: a list of components, each with the energy of
// one of its actions (or its static power) as a min / typical / max band and the source of the
// figure. Component names are fixed (docs/energy.md); an unknown one is an error.
//
// estimate() turns a workload (a count of each action: channel-iterations, conversions, weight
// writes, digital MACs, and the serial counts that make the latency) into an energy and latency report: every line carries its action count, its band and the
// source of its figure; TOPS/W and the same work on a GPU follow from them.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "sim/gpu.hpp"

namespace aoc {

struct Hardware;

// Every energy component, in the order of the report: the loop, the weights, the conversions,
// the rest (the file's energy section names them; a sweep's breakdown columns follow them).
inline constexpr const char* kEnergyComponents[] = {"led_drive", "photodetector_receiver", "analog_electronics", "slm_static", "slm_reload",
                                                    "dac",       "adc",                    "activation_io",      "digital",    "control"};

struct Band {
  double min = 0, typ = 0, max = 0;
};

struct EnergyComponent {
  std::string name;    // e.g. "led_drive", "adc"
  std::string action;  // what one unit is: fixed by the name (see energy.cpp)
  std::string unit;    // "pJ" per action, or "W" for static power
  Band value;
  std::string source;  // paper, datasheet figure, survey, or "assumption: why"
  // dac, adc, slm_reload: the converter resolution the figure holds at (0: none given). A machine
  // at other bits (converters.*_bits) pays 2^(bits - at_bits) times it per conversion (Walden's figure
  // of merit: constant energy per conversion step), and bits / at_bits per weight write (a code of
  // that many bits moved to the SLM).
  int at_bits = 0;
  // dac, adc: the conversion rate the figure holds up to, in MHz (0: any). A converter run faster
  // (timing.readout_rate_mhz, 1 / timing.dac_conversion_ns) pays rate / at_rate_mhz times it per
  // conversion: past the survey's frontier corner the energy per conversion grows with the rate.
  double at_rate_mhz = 0;
};

// The parameters that turn a photon count per detector sample into LED energy (energy.photon_budget).
struct PhotonBudget {
  double wavelength_nm = 0;
  double optical_path_efficiency = 0;      // detected photons per detector over photons emitted per LED
  double detector_quantum_efficiency = 0;  // electrons per photon
  double led_wall_plug_efficiency = 0;     // optical power out over electrical power in
  double photons_per_sample = 0;           // optional design point (0: none); the workload (--photons) takes precedence
  // The LED's electrical energy per detected photon: h c / lambda / (QE x path x WPE), in J.
  double led_joules_per_photon() const;
};

struct EnergySpec {
  std::vector<EnergyComponent> components;
  std::optional<PhotonBudget> photon_budget;

  const EnergyComponent* find(const std::string& name) const;
};

// What runs on the machine, as a count of each action. Two forms, one model:
//  - the loop form (n > 0): F fixed points of K iterations each (mean) on n channels, the one loop
//    of `aoc estimate --hw`. Every count below that is left unset follows from it: n*(K + H)*F LED
//    and receiver channel-iterations (H: the hold after the iterations, hold_periods()), n*n*K*F
//    analog MACs, one module's SLMs, n channels powered through each reload, and per fixed point
//    one settle (from loop closure), one DAC step and timing.readout_samples ADC samples (all
//    channels in parallel).
//  - explicit (n = 0): every count as given, unset = 0 (a compiled program's counts per token,
//    runtime/estimate/program_estimate.hpp).
// Counts are doubles: a per-token count of a loop of K (mean) iterations need not be whole.
struct Workload {
  int n = 0;                               // loop form: state size, channels used
  double fixed_points = 1;                 // F; the control component's count (runs of the core)
  double iterations_per_fixed_point = 0;   // loop form: K (mean)
  double weight_writes = 0;                // weights programmed (n*n for one load)
  double weight_reloads = 0;               // serial SLM programmings on the critical path (each timing.slm_reload_us)
  double dac_conversions = 0;              // values converted to analog
  double adc_conversions = 0;              // values converted to digital
  double digital_macs = 0;                 // digital operations (each at energy.digital)
  std::optional<double> photons_per_sample;  // photon-budget mode: overrides energy.photon_budget.photons_per_sample

  // Energy counts (loop form: derived when unset). A channel draws its LED, receiver and analog
  // power every period the loop is closed: its iterations and, after them, the hold until the
  // readout window closes (loop form: n*F*(K + hold_periods)).
  std::optional<double> led_channel_iterations;       // inputs lit, per loop period
  std::optional<double> receiver_channel_iterations;  // outputs detected; also the analog electronics' count
  std::optional<double> hold_periods;                 // loop form: per fixed point, see hold_periods()
  std::optional<double> analog_macs;                  // weights x inputs of the optical passes
  std::optional<double> modules;                      // modules whose SLMs draw static power over the whole latency
  // The channels of the modules each reload reprograms, summed over the reloads: their receivers and
  // analog electronics stay powered through the reload (loop form: n per reload). The LEDs are off.
  std::optional<double> reloaded_channels;
  // Serial counts: the latency (loop form: derived when unset).
  std::optional<double> loop_periods;   // optical periods one after another (timing.loop_period_ns each)
  std::optional<double> settle_events;  // waits before a readout (timing.settle_ns each)
  std::optional<double> dac_steps;      // DAC conversions one after another (timing.dac_conversion_ns each)
  std::optional<double> adc_samples;    // ADC samples one after another (1 / timing.readout_rate_mhz each)
  // Digital work on the critical path, at timing.digital_gmac_per_s (a latency line only when set;
  // a count > 0 with no digital_gmac_per_s in the file is an error naming it).
  std::optional<double> serial_digital_macs;
  // The MACs the GPU comparison runs (default: the analog MACs; those multiply by weights, each
  // reading one at batch 1), and how many different weights those are (loop form: n*n; explicit:
  // the weight writes).
  std::optional<double> gpu_macs;
  std::optional<double> gpu_distinct_weights;
};

// One inference as `aoc estimate` models it: F fixed points on n channels with the same weights
// (programmed once: n*n writes, one reload), one DAC conversion per channel per fixed point and
// timing.readout_samples ADC conversions per channel per fixed point, no digital work.
Workload inference_workload(const Hardware& hw, int n, long long fixed_points, double iterations);

struct EnergyLine {
  std::string name, action;
  double count = 0;  // actions over the workload (module-seconds for a static power)
  double per_action = 0;  // typ figure per action, in the file's unit (pJ or W)
  Band joules;       // over the workload
  std::string source;
};

struct LatencyLine {
  std::string name;     // loop, settle, readout, conversions, digital (when set), weight_reload
  double seconds = 0;   // over the workload
  std::string formula;  // how it was computed, with the numbers
  std::string source;
};

struct EnergyReport {
  std::string machine;
  Workload work;  // as given, with every count the loop form derives filled in
  std::vector<EnergyLine> energy;  // every component of the model, in a fixed order
  Band total_joules;
  std::vector<LatencyLine> latency;
  double total_seconds = 0;
  double analog_macs = 0;  // n*n*K*F in the loop form
  double ops = 0;          // 2 * analog_macs
  Band tops_per_watt;      // min from the max energy, max from the min energy
  bool photon_budget = false;
  double led_pj_photon = 0;  // the computed LED energy per channel-iteration, in photon-budget mode
  GpuRoofline gpu;  // the same work on the chosen GPU
  std::vector<std::string> notes;  // what the estimate assumed or replaced
};

// Throws aoc::Error naming the section or component that the workload needs and the file lacks.
EnergyReport estimate(const Hardware& hw, const Workload& w, const GpuChoice& gpu = {});

// The precision a GPU would run this machine's work at: the choice's, else fp8 for SLM weights of
// 8 bits or fewer, bf16 above (and without a converters section).
std::string gpu_precision(const Hardware& hw, const GpuChoice& gpu);

}  // namespace aoc
