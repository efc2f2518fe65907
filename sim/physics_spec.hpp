// The physical sections of a hardware file beyond the twin's calibration: noise levels,
// converters and timing (docs/hardware.md). Each value in the file carries a unit, checked on
// load, and a source (a paper, a datasheet, or "estimate: why").
#pragma once
#include <array>
#include <map>
#include <string>
#include <vector>

namespace aoc {

// The auto-zero's reads after each programming (TileNoise::zero_reads, aoc run --zero-reads): on
// aoc-48, 1024 ADC samples at 6.25 MHz are 164 us against the SLM frame's 10 ms, and they leave the
// reads' white noise / 32 in each output's bias.
constexpr int kZeroReads = 1024;

// Per-iteration noise of the optical loop, in the loop's own units (the twin's volts).
// A level of 0 switches a source off; noise as a whole is switched per run (RunNoise).
struct NoiseSpec {
  double led_bias = 0;            // LED bias light, in the units of the LED drive (signals swing around it)
  double photons_per_sample = 0;  // photons detected per detector per iteration at the reference power
  double thermal_sigma = 0;       // the analog electronics' own noise after the detectors, V rms per channel per iteration
  // The detector amplifier's input-referred current noise, A/sqrt(Hz) per path; its electrons per
  // sample (derive_operating_point: both paths over the shot-matched bandwidth 1/(2T), i sqrt(T) / q)
  // meet the signal where the photons do, so the light's level sets both (0: none).
  double receiver_noise_density = 0;
  double receiver_electrons = 0;
  double rin_sigma = 0;           // LED relative intensity noise, relative rms per iteration
  double slm_fixed_pattern_sigma = 0;  // relative rms error of each SLM transmission, per programming
  double drift_sigma = 0;         // slow per-channel drift, V rms
  double drift_time_us = 1;       // time over which the drift decorrelates
  double flicker_sigma = 0;       // 1/f noise per channel, V rms over a solve
  // "derived": "energy" in the file: photons_per_sample follows from the LED operating point of the
  // energy section (derive_operating_point), with the band of the LED figure it came from.
  bool photons_derived = false;
  std::array<double, 2> photons_band{0, 0};  // (min, max) where derived; else both = photons_per_sample
};

struct ConverterSpec {
  int slm_bits = 9;                            // signed weight codes -2^(b-1) .. 2^(b-1)-1
  int dac_bits = 8;                            // input injection DAC
  std::array<double, 2> dac_range{-1.3, 1.3};  // V
  int adc_bits = 8;                            // fixed-point readout ADC
  std::array<double, 2> adc_range{-3.3, 3.3};  // V
};

struct TimingSpec {
  double loop_period_ns = 20;     // one optical iteration
  double bandwidth_mhz = 0;       // -3 dB bandwidth of the loop electronics; 0: settles within a period
  double settle_ns = 0;           // wait before the readout window opens
  int readout_samples = 1;        // ADC samples averaged per readout
  double readout_rate_mhz = 1;    // ADC sample rate during readout
  double slm_reload_us = 0;       // time to program a new weight matrix
  double dac_conversion_ns = 0;   // converting and settling one injected input, before the loop starts
  double digital_gmac_per_s = 0;  // throughput of the digital ops next to the loop; 0: not given
};

// How the machine is organised, for the compiler: how many optical modules (each a core of
// `channels` x `channels` weights), which elementwise functions its analog electronics compute,
// where partial sums of a split matrix are added, and where the recurrent state between tokens is
// kept.
struct ArchitectureSpec {
  int modules = 1;
  std::vector<std::string> analog_functions;  // graph op names: "Tanh", "Add", ...
  enum class Sum { Analog, Digital } partial_sums = Sum::Digital;
  enum class Memory { Digital, Analog } state_memory = Memory::Digital;
  bool analog(const std::string& op) const;
};

// The elementwise ops an analog electronics section may list.
const std::vector<std::string>& analog_capable_functions();

// Fraction of its step a state reaches in one period with a first-order response of this bandwidth.
double step_fraction(const TimingSpec& t);

// The readout window: timing.readout_samples at timing.readout_rate_mhz, in ns.
double readout_window_ns(const TimingSpec& t);
// The settle wait left after K iterations: the settle clock starts when the loop closes, so the
// iterations are part of it (the readout opens at max(K periods, settle)).
double settle_after_ns(const TimingSpec& t, double iterations);
// Loop periods a fixed point's loop stays closed after its K iterations, lit and detected, until
// the readout window closes: (settle_after_ns + readout_window_ns) / loop period.
double hold_periods(const TimingSpec& t, double iterations);

}  // namespace aoc
