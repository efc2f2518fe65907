// Random numbers for the noisy loop. Every draw is a pure function of (seed, source, and up to
// three indices such as sample, iteration and channel): Philox4x32-10 (Random123), counter-based,
// so a result does not depend on the thread count, the batch size or how a batch is split.
#pragma once
#include <cstdint>
#include <vector>

namespace aoc::noise {

enum class Source : std::uint32_t { Shot = 1, Thermal = 2, Rin = 3, SlmPattern = 4, Drift = 5, Flicker = 6, Init = 7 };  // Init: trainable models' weights

// One standard normal. Box-Muller gives two per Philox block: index c uses block c/2, the cosine
// branch for even c and the sine branch for odd c.
double normal(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c);

// out[c] = normal(seed, s, a, b, c) for c = 0 .. n-1, two per Philox block.
void normals(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, int n, double* out);

// Slow per-channel drift at time t (in units of the drift's correlation time): a standard normal
// at each whole time, linearly interpolated between them, times sigma.
double drift(std::uint64_t seed, std::uint32_t channel, double t, double sigma);
double drift_knot(std::uint64_t seed, std::uint32_t channel, std::uint32_t m);  // the normal at whole time m

// 1/f ("flicker") noise of one (sample, channel) over `length` iterations: white normals shaped
// to a 1/f power spectrum with FFTW, mean removed and scaled to rms sigma exactly.
std::vector<double> flicker(std::uint64_t seed, std::uint32_t sample, std::uint32_t channel, int length, double sigma);

}  // namespace aoc::noise
