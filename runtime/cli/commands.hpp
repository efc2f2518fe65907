// The subcommands of the `aoc` executable; each file registers one.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

namespace aoc::cli {

void add_hw(CLI::App& app);
void add_verify_dt(CLI::App& app);
void add_loop(CLI::App& app);
void add_run(CLI::App& app);
void add_bench(CLI::App& app);
void add_estimate(CLI::App& app);
void add_import(CLI::App& app);
void add_interpret(CLI::App& app);
void add_compile(CLI::App& app);
void add_check(CLI::App& app);
void add_train(CLI::App& app);
void add_task(CLI::App& app);
void add_sweep(CLI::App& app);
void add_pareto(CLI::App& app);
void add_explore(CLI::App& app);
void add_report(CLI::App& app);
void add_list(CLI::App& app);
void add_problem(CLI::App& app);
void add_optimize(CLI::App& app);
void add_retina(CLI::App& app);
void add_retina_train(CLI::App& retina);  // aoc retina train (cmd_retina_train.cpp), added by add_retina
void add_retina_eval(CLI::App& retina);   // aoc retina eval (cmd_retina_eval.cpp), added by add_retina
void add_retina_stimulus(CLI::App& retina);  // aoc retina stimulus (cmd_retina_eval.cpp), added by add_retina

// Checks of a number flag that refuse NaN, infinity and text CLI11 would wrap, and say the range as a
// person writes it ("a number > 0", not a 309-digit bound): positive() > 0, non_negative() >= 0,
// between(lo, hi) within [lo, hi]; seed_value() a whole number 0 .. 2^64 - 1 (no wrap of -1).
CLI::Validator positive();
CLI::Validator non_negative();
CLI::Validator between(double lo, double hi);
CLI::Validator seed_value();
// --program-seed: the SLM's programming errors (its fixed pattern) keyed apart from the read noise,
// so that one programmed chip is evaluated under several --seed draws (unset: the noise seed).
void add_program_seed_flag(CLI::App* c, std::optional<std::uint64_t>& program_seed);
void add_zero_reads_flag(CLI::App* c, int& zero_reads);  // --zero-reads N (TileNoise::zero_reads)
void add_floor_patience_flag(CLI::App* c, int& patience, const char* where);  // --floor-patience N (SolverOptions::floor_patience)
// --after-programming-us T and --zero-every-us T: the programming's moment on the clock and the
// auto-zero taken again (TileNoise::after_programming_us, zero_every_us)
void add_clock_flags(CLI::App* c, std::optional<double>& after_programming_us, std::optional<double>& zero_every_us);
// --write-verify TOL and --verify-rounds R (aoc run, check, retina eval; aoc estimate PROG bills
// them): `what` says what the flag does for that command.
void add_write_verify_flags(CLI::App* c, double& tolerance, int& rounds, const std::string& what);
// A record's program_seed: the number, or null where the noise seed keyed the programming too.
inline nlohmann::json seed_json(const std::optional<std::uint64_t>& s) { return s ? nlohmann::json(*s) : nlohmann::json(nullptr); }

// What a run may allocate, in GiB (aoc --max-memory; 0: no limit; default: the machine's memory).
// The default is the machine's memory: a file that asks for more fails at once with one line instead
// of swapping or being killed by the kernel (RLIMIT_DATA: the heap and private mappings).
double& memory_limit_gib();

// The bundled machines, one line each (aoc hw list, aoc list).
void print_machines();

// The process exit status a subcommand asks for (0 unless it sets it: e.g. verify-dt on a failure).
int& exit_status();

// Prints JSON to stdout, or writes it atomically to `path` when given.
void emit_json(const std::string& json_text, const std::string& path);

// -o writes a command's JSON record, so it needs --json: without it, an error naming both (never a
// run that writes nothing). Call first in the command's callback.
void require_json_for_output(const CLI::App* c, const std::string& cmd);

}  // namespace aoc::cli
