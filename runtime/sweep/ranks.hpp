// The processes of a sweep or a search: this process alone, or one rank of an MPI job. MPI is
// started only when mpirun started the process, so an aoc built with MPI runs as usual without it;
// an aoc built without it refuses to run under mpirun with more than one rank (each would run the
// whole job). Only the main thread calls MPI.
#pragma once
#include <string>
#include <vector>

namespace aoc::sweep {

class Ranks {
 public:
  // `what` names the job in the refusal ("sweep", "explore").
  explicit Ranks(const std::string& what);
  ~Ranks();
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool mpi() const { return mpi_; }

  // Whether `flag` is true on any rank.
  bool any(bool flag) const;
  // Every rank's text, in rank order, on every rank.
  std::vector<std::string> allgather(const std::string& mine) const;
  // Rank 0's text on every rank.
  std::string broadcast(const std::string& from_root) const;
  // The message on stderr, then every rank stops (exit status 1).
  [[noreturn]] void abort(const std::string& what) const;

 private:
  int rank_ = 0, size_ = 1;
  bool mpi_ = false;
};

// Whether this aoc was built with MPI.
bool mpi_built();

}  // namespace aoc::sweep
