#include "runtime/sweep/ranks.hpp"

#include <cstdio>
#include <cstdlib>

#ifdef AOC_WITH_MPI
#include <mpi.h>
#endif

#include "sim/error.hpp"

namespace aoc::sweep {

namespace {

// The size of the MPI job this process was started in by mpirun (OpenMPI, MPICH), 0 if none.
int launched_size() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return 0;
}

}  // namespace

bool mpi_built() {
#ifdef AOC_WITH_MPI
  return true;
#else
  return false;
#endif
}

Ranks::Ranks(const std::string& what) {
#ifdef AOC_WITH_MPI
  (void)what;
  if (launched_size() > 0) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    mpi_ = true;
  }
#else
  if (launched_size() > 1)
    throw Error(what + ": started by mpirun, but this aoc is built without MPI (configure with -DAOC_MPI=ON and OpenMPI installed): "
                       "every rank would run the whole " + what);
#endif
}

Ranks::~Ranks() {
#ifdef AOC_WITH_MPI
  if (mpi_) MPI_Finalize();
#endif
}

bool Ranks::any(bool flag) const {
#ifdef AOC_WITH_MPI
  int in = flag, out = 0;
  if (mpi_) MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  return mpi_ ? out != 0 : flag;
#else
  return flag;
#endif
}

std::vector<std::string> Ranks::allgather(const std::string& mine) const {
#ifdef AOC_WITH_MPI
  if (mpi_) {
    int n = static_cast<int>(mine.size());
    std::vector<int> counts(static_cast<std::size_t>(size_)), at(static_cast<std::size_t>(size_));
    MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (int r = 0; r < size_; ++r) at[static_cast<std::size_t>(r)] = total, total += counts[static_cast<std::size_t>(r)];
    std::string all(static_cast<std::size_t>(total), '\0');
    MPI_Allgatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), at.data(), MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(static_cast<std::size_t>(at[static_cast<std::size_t>(r)]),
                                                             static_cast<std::size_t>(counts[static_cast<std::size_t>(r)])));
    return out;
  }
#endif
  return {mine};
}

std::string Ranks::broadcast(const std::string& from_root) const {
#ifdef AOC_WITH_MPI
  if (mpi_) {
    long long n = static_cast<long long>(from_root.size());
    MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    std::string s = rank_ == 0 ? from_root : std::string(static_cast<std::size_t>(n), '\0');
    MPI_Bcast(s.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD);
    return s;
  }
#endif
  return from_root;
}

void Ranks::abort(const std::string& what) const {
  std::fprintf(stderr, "aoc: error: %s\n", what.c_str());
#ifdef AOC_WITH_MPI
  if (mpi_) MPI_Abort(MPI_COMM_WORLD, 1);
#endif
  std::_Exit(1);
}

}  // namespace aoc::sweep
