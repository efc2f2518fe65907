// Random numbers for the noisy loop. Every draw is a pure function of (seed, source, and up to
// three indices such as sample, iteration and channel): Philox4x32-10 (Random123), counter-based,
// so a result does not depend on the thread count, the batch size or how a batch is split.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace aoc::noise {

enum class Source : std::uint32_t { Shot = 1, Thermal = 2, Rin = 3, SlmPattern = 4, Drift = 5, Flicker = 6, Init = 7, Optimize = 8, Zero = 9 };  // Init: trainable models' weights; Optimize: optimisation problems, initial states and baselines; Zero: the white noise of each auto-zero taken again (TileNoise::zero_every_us)

// One standard normal. Box-Muller gives two per Philox block: index c uses block c/2, the cosine
// branch for even c and the sine branch for odd c.
double normal(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c);

// out[k] = normal(seed, s, a, b, c0 + k) for k = 0 .. n-1, two per Philox block.
void normals(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c0, int n, double* out);

// Standard normals in float for the hot loop: out[k] = normal_f32(seed, s, a, b, c0 + k) for
// k = 0 .. n-1, where elements 4k .. 4k + 3 come from the Philox4x32-10 block with counter
// (s, a, b, k) (key: the seed's two halves, as normal() uses): elements 4k and 4k + 1 are
// normal_pair of its words 0 and 1, elements 4k + 2 and 4k + 3 of its words 2 and 3. Vectorised,
// the Box-Muller transform fused with Philox's rounds; every element's value depends only on
// (seed, s, a, b, c): not on n, c0, the pointer's alignment or the machine's thread count.
void normals_f32(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c0, int n, float* out);
float normal_f32(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c);
// One stream of normals: its element c is normal_f32(seed, s, a, b, c).
struct Stream {
  Source s;
  std::uint32_t a, b;
};
// normals_f32 of several streams at once, drawn together so that short ones keep the vectors full:
// out[r * ld + k] = normal_f32(seed, streams[r].s, streams[r].a, streams[r].b, c0 + k).
void normals_f32(std::uint64_t seed, const Stream* streams, int count, std::uint32_t c0, int n, float* out, std::ptrdiff_t ld);

// The same values as normals_f32 of several streams, through a small memo of this thread's recent
// draws keyed by every argument: for draws that recur, such as the knots of the slow 1/f octaves
// and of drift inside a block (a row's fast knots are kept by the tile itself). A memo of a pure
// function, so it changes no value whatever the threads.
void normals_f32_recent(std::uint64_t seed, const Stream* streams, int count, std::uint32_t c0, int n, float* out, std::ptrdiff_t ld);

// The two halves of normals_f32, exposed for tests. philox_words: the Philox words of the same
// elements, from the same vectorised Philox. normal_pair: Box-Muller in float on two words,
// (r cos t, r sin t) with r = sqrt(-2 ln u), u = ((a >> 1) + 1/2) / 2^31, and t = 2 pi (b + 1/2) /
// 2^32, to within 2e-6 of the exact transform of those words (float rounding of u included). u is
// never 0, so every normal is finite, and r is 6.66 at most (a < 2); turning b by a half turn
// (b + 2^31) negates both exactly.
void philox_words(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c0, int n, std::uint32_t* out);
std::pair<float, float> normal_pair(std::uint32_t a, std::uint32_t b);


}  // namespace aoc::noise
