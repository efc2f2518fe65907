// Built into aoc and aoc_tests only with -DAOC_SANITIZE=ON (docs/reliability.md). The sanitizers call
// these for their defaults, so every run of an instrumented binary (ctest, the fuzzers, a shell)
// checks the same way without environment variables.

extern "C" {

// AddressSanitizer: malloc returns NULL for a request it cannot serve, as glibc does, instead of
// aborting: HDF5 asks for what a damaged file's header says and handles the NULL with an error
// (aoc's own sizes are checked before they are allocated).
const char* __asan_default_options() { return "allocator_may_return_null=1"; }

// UndefinedBehaviorSanitizer: a stack trace for every report (the build makes them fatal).
const char* __ubsan_default_options() { return "print_stacktrace=1"; }

// LeakSanitizer: third-party caches that live until exit by design, never aoc's own memory. FFTW
// keeps its plans and wisdom (aoc plans once per size and reuses them); Open MPI and its helpers
// (hwloc, PMIx, the transports) keep their state after MPI_Finalize; HDF5 keeps its free lists.
const char* __lsan_default_suppressions() {
  return "leak:libfftw3\n"
         "leak:fftw_\n"
         "leak:libmpi\n"
         "leak:libopen-pal\n"
         "leak:libopen-rte\n"
         "leak:libhwloc\n"
         "leak:libpmix\n"
         "leak:libevent\n"
         "leak:mca_\n";
}

}  // extern "C"
