// Random numbers for the noisy loop. Every draw is a pure function of (seed, source, and up to
// three indices such as sample, iteration and channel): Philox4x32-10 (Random123), counter-based,
// so a result does not depend on the thread count, the batch size or how a batch is split.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace aoc::noise {

enum class Source : std::uint32_t { Shot = 1, Thermal = 2, Rin = 3, SlmPattern = 4, Drift = 5, Flicker = 6, Init = 7 };  // Init: trainable models' weights

// One standard normal. Box-Muller gives two per Philox block: index c uses block c/2, the cosine
// branch for even c and the sine branch for odd c.
double normal(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c);

// out[k] = normal(seed, s, a, b, c0 + k) for k = 0 .. n-1, two per Philox block.
void normals(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c0, int n, double* out);

// Standard normals in float for the hot loop: out[k] = normal_f32(seed, s, a, b, c0 + k) for
// k = 0 .. n-1, where element c is word c % 4 of the Philox4x32-10 block with counter
// (s, a, b, c / 4) (key: the seed's two halves, as normal() uses), turned into a normal by the
// inverse CDF (a float approximation of erfinv). Vectorised; every element's value depends only on
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
// elements, from the same vectorised Philox. normal_from_word: the normal of word w, the quantile
// of u = (w + 0.5) / 2^32 to within 4e-7 relative. u is never 0 or 1, so every normal is finite
// and the largest |normal| is 6.33796, at w = 0 and 2^32 - 1; normal_from_word(~w) is exactly
// -normal_from_word(w).
void philox_words(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c0, int n, std::uint32_t* out);
float normal_from_word(std::uint32_t w);


}  // namespace aoc::noise
