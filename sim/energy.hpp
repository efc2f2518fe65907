// The energy model of a machine, Accelergy-style: a list of components, each with the energy of
// one of its actions (or its static power) as a min / typical / max band and the source of the
// figure. Component names are fixed (docs/energy.md); an unknown one is an error.
//
// estimate() turns a workload (how many fixed points, iterations, conversions, weight writes)
// into an energy and latency report: every line carries its action count, its band and the
// source of its figure; TOPS/W and the same work on a GPU follow from them.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace aoc {

struct Hardware;

struct Band {
  double min = 0, typ = 0, max = 0;
};

struct EnergyComponent {
  std::string name;    // e.g. "led_drive", "adc"
  std::string action;  // what one unit is: fixed by the name (see energy.cpp)
  std::string unit;    // "pJ" per action, or "W" for static power
  Band value;
  std::string source;  // paper, datasheet figure, survey, or "assumption: why"
};

// The parameters that turn a photon count per detector sample into LED energy (energy.photon_budget).
struct PhotonBudget {
  double wavelength_nm = 0;
  double optical_path_efficiency = 0;      // detected photons per detector over photons emitted per LED
  double detector_quantum_efficiency = 0;  // electrons per photon
  double led_wall_plug_efficiency = 0;     // optical power out over electrical power in
  double photons_per_sample = 0;           // optional design point (0: none); the workload (--photons) takes precedence
};

struct EnergySpec {
  std::vector<EnergyComponent> components;
  std::optional<PhotonBudget> photon_budget;

  const EnergyComponent* find(const std::string& name) const;
};

// What runs on the machine: F fixed points of K iterations each (mean) on n channels, plus the
// conversions and weight writes around them.
struct Workload {
  int n = 0;                               // state size: channels used
  long long fixed_points = 1;              // F
  double iterations_per_fixed_point = 0;   // K (mean)
  long long weight_writes = 0;             // weights programmed (n*n for one load)
  long long weight_reloads = 0;            // times the SLM is programmed (each costs timing.slm_reload_us)
  long long dac_conversions = 0;           // input injection
  long long adc_conversions = 0;           // fixed-point readout
  long long digital_macs = 0;              // digital work outside the loop
  std::optional<double> photons_per_sample;  // photon-budget mode: overrides energy.photon_budget.photons_per_sample
};

// One inference as `aoc estimate` models it: F fixed points on n channels with the same weights
// (programmed once: n*n writes, one reload), one DAC conversion per channel per fixed point and
// timing.readout_samples ADC conversions per channel per fixed point, no digital work.
Workload inference_workload(const Hardware& hw, int n, long long fixed_points, double iterations);

struct EnergyLine {
  std::string name, action;
  double count = 0;  // actions over the workload (seconds for a static power)
  double per_action = 0;  // typ figure per action, in the file's unit (pJ or W)
  Band joules;       // over the workload
  std::string source;
};

struct LatencyLine {
  std::string name;     // loop, settle, readout, conversions, weight_reload
  double seconds = 0;   // over the workload
  std::string formula;  // how it was computed, with the numbers
  std::string source;
};

// The same work on a GPU at its datasheet throughput and power.
struct GpuComparison {
  std::string name;
  double flops = 0, watts = 0;  // dense peak and board power
  double pj_per_mac = 0;
  double joules = 0;            // for the workload's analog MACs
  double seconds = 0;           // at peak throughput
  double tops_per_watt = 0;
  std::string source;
};

struct EnergyReport {
  std::string machine;
  Workload work;
  std::vector<EnergyLine> energy;  // every component of the model, in a fixed order
  Band total_joules;
  std::vector<LatencyLine> latency;
  double total_seconds = 0;
  double analog_macs = 0;  // n*n*K*F
  double ops = 0;          // 2 * analog_macs
  Band tops_per_watt;      // min from the max energy, max from the min energy
  bool photon_budget = false;
  double led_pj_photon = 0;  // the computed LED energy per channel-iteration, in photon-budget mode
  GpuComparison gpu;
  std::vector<std::string> notes;  // what the estimate assumed or replaced
};

// Throws aoc::Error naming the section or component that the workload needs and the file lacks.
EnergyReport estimate(const Hardware& hw, const Workload& w);

}  // namespace aoc
