// A batch of state vectors as the kernels want it: row-major, each row padded with zeros to a
// whole number of 64-byte vectors and 64-byte aligned. Padding keeps every element on the same
// code path whatever the batch size, which is what makes results independent of the batch split.
#pragma once
#include <Eigen/Dense>
#include <cstddef>
#include <new>
#include <vector>

namespace aoc {

template <class T>
constexpr int kLanes = 64 / static_cast<int>(sizeof(T));  // elements per 64-byte vector

template <class T>
constexpr int padded(int n) { return (n + kLanes<T> - 1) / kLanes<T> * kLanes<T>; }

// 64-byte aligned storage whatever the build's SIMD width, so rows start on a vector boundary.
template <class T>
struct Allocator64 {
  using value_type = T;
  Allocator64() = default;
  template <class U>
  Allocator64(const Allocator64<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <class U>
  bool operator==(const Allocator64<U>&) const { return true; }
};

template <class T>
using AlignedVector = std::vector<T, Allocator64<T>>;

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <class T>
struct Batch {
  int rows = 0, n = 0, ld = 0;  // ld: padded row length
  AlignedVector<T> data;

  Batch() = default;
  Batch(int rows_, int n_) : rows(rows_), n(n_), ld(padded<T>(n_)), data(static_cast<size_t>(rows_) * padded<T>(n_), T(0)) {}
  T* row(int r) { return data.data() + static_cast<size_t>(r) * ld; }
  const T* row(int r) const { return data.data() + static_cast<size_t>(r) * ld; }

  template <class M>
  static Batch from(const M& m) {
    Batch b(static_cast<int>(m.rows()), static_cast<int>(m.cols()));
    for (int r = 0; r < b.rows; ++r)
      for (int j = 0; j < b.n; ++j) b.row(r)[j] = static_cast<T>(m(r, j));
    return b;
  }
  RowMatrix<double> to_double() const {
    RowMatrix<double> m(rows, n);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < n; ++j) m(r, j) = static_cast<double>(row(r)[j]);
    return m;
  }
};

// Where a step happens: the iteration (0-based) and, for each row of the batch, the sample it
// holds (nullptr: row r holds sample r). Noise draws are keyed by these, not by the row.
struct StepContext {
  int iteration = 0;
  const int* samples = nullptr;
  bool final = false;  // the released rule's final call: its f(z) is the result (a graph body commits its states)
  // The index of the batch's first sample in the user's whole input: noise is keyed by a sample's
  // index there, so a batch split over several runs draws what one run of the whole would.
  int first_sample = 0;
  int sample(int row) const { return first_sample + (samples ? samples[row] : row); }
};

}  // namespace aoc
