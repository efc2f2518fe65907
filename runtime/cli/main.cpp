// aoc: simulator and compiler for analog optical computers. One executable, one subcommand per job.
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "runtime/cli/commands.hpp"
#include "runtime/io/output.hpp"
#include "sim/error.hpp"
#include "sim/isa.hpp"
#include "sim/json_reader.hpp"

namespace aoc::cli {

int& exit_status() {
  static int status = 0;
  return status;
}

void emit_json(const std::string& json_text, const std::string& path) {
  if (path.empty()) std::cout << json_text << "\n";
  else write_file_atomic(path, json_text + "\n");
}

namespace {

// `text` as a finite number, or why not.
std::string finite_number(const std::string& text, double& v) {
  std::size_t used = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    return "expected a number, got \"" + text + "\"";
  }
  if (used != text.size()) return "expected a number, got \"" + text + "\"";
  if (!std::isfinite(v)) return "expected a finite number, got " + text;
  return "";
}

CLI::Validator number_check(const std::string& name, const std::function<bool(double)>& ok, const std::string& want) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        if (std::string why = finite_number(text, v); !why.empty()) return why;
        return ok(v) ? std::string() : "expected " + want + ", got " + text;
      },
      name);
}

}  // namespace

CLI::Validator positive() { return number_check("> 0", [](double v) { return v > 0; }, "a number > 0"); }
CLI::Validator non_negative() { return number_check(">= 0", [](double v) { return v >= 0; }, "a number >= 0"); }
CLI::Validator between(double lo, double hi) {
  // whole bounds as a person writes them (100000, not 1e+05)
  const auto text = [](double v) { return v == std::floor(v) && std::fabs(v) < 1e15 ? std::to_string(static_cast<long long>(v)) : jsonr::num(v); };
  return number_check(text(lo) + " .. " + text(hi), [=](double v) { return v >= lo && v <= hi; },
                      "a number from " + text(lo) + " to " + text(hi));
}
CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool digits = !text.empty() && text.size() <= 20 && text.find_first_not_of("0123456789") == std::string::npos;
        if (!digits || (text.size() == 20 && text > "18446744073709551615"))
          return "expected a whole number from 0 to 18446744073709551615, got " + text;
        return "";
      },
      "SEED");
}

void add_write_verify_flags(CLI::App* c, double& tolerance, int& rounds, const std::string& what) {
  c->add_option("--write-verify", tolerance, what)->check(between(0, 1));
  c->add_option("--verify-rounds", rounds, "the writes again per pixel --write-verify may take")->check(between(1, 64))->capture_default_str();
}

void add_program_seed_flag(CLI::App* c, std::optional<std::uint64_t>& program_seed) {
  c->add_option_function<std::uint64_t>("--program-seed", [&program_seed](std::uint64_t v) { program_seed = v; },
                                        "sim: seed of the SLM's programming errors (its fixed pattern: the chip as written), apart from the "
                                        "read noise's --seed; one program seed with several --seed values is one programmed chip under fresh "
                                        "read noise (default: the noise seed, a new chip per seed)")
      ->check(seed_value());
}

void add_clock_flags(CLI::App* c, std::optional<double>& us, std::optional<double>& every) {
  c->add_option("--after-programming-us", us,
                "sim, with noise: run this many microseconds after the programming. The tiles are programmed and auto-zeroed at "
                "clock 0, the zero reads taking out the drift and 1/f noise of that moment as well, and the run starts T later, "
                "so the slow noise has drifted away from its zero by then (0: right after programming). Default: the "
                "programming has no moment on the clock (the auto-zero leaves the slow noise out, the run starts at 0)");
  c->add_option("--zero-every-us", every,
                "sim, with noise and --after-programming-us: the auto-zero taken again every T microseconds of the clock, as an "
                "operator would: each zero (--zero-reads reads) sets the bias again, taking out the drift and 1/f noise of its "
                "moment to its reads' white noise; a solve uses the last zero before its slot. Each zero is --zero-reads ADC "
                "samples at the readout rate (164 us on aoc-48 at 1024: 1.6 % of the clock every 10 ms), which the run's clock "
                "leaves out and aoc estimate PROG --zero-every-us bills. Default: the programming's zero only, the slow noise "
                "drifting from it for the whole run");
}

void add_floor_patience_flag(CLI::App* c, int& patience, const char* where) {
  c->add_option("--floor-patience", patience,
                std::string(where) + ": a sample whose residual has not fallen under 0.9 of its lowest for this many steps stops at "
                "its noise floor, its fixed point the mean of those iterates (a readout averaged over them: more steps, less of the "
                "white noise, more iterations per token); 0: off, run to max_iter")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
}

void add_zero_reads_flag(CLI::App* c, int& zero_reads) {
  c->add_option("--zero-reads", zero_reads,
                "sim, with noise: the auto-zero after each programming: this many reads with every value at 0, averaged, "
                "set each output's bias (taking out the offset the SLM's fixed pattern gives the light that carries no "
                "signal, to the reads' white noise / sqrt(N)); 0: none, the chain's offset as programmed")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
}

void require_json_for_output(const CLI::App* c, const std::string& cmd) {
  const CLI::Option* out = c->get_option("-o");
  if (out->count() && !c->get_option("--json")->count())
    throw Error(cmd + ": -o writes the JSON record: give --json too");
  // the record must not land on a file the command reads: every other option naming an existing file
  if (!out->count()) return;
  std::vector<NamedPath> inputs;
  for (const CLI::Option* opt : c->get_options())
    if (opt != out)
      for (const std::string& v : opt->results())
        if (std::error_code ec; !v.empty() && std::filesystem::is_regular_file(v, ec))
          inputs.push_back({opt->get_name().rfind("-", 0) == 0 ? opt->get_name() : "the " + opt->get_name(), v});
  check_outputs({{"-o", out->as<std::string>()}}, inputs);
}

double& memory_limit_gib() {
  static double gib = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE)) / (1 << 30);
  return gib;
}

namespace {

void apply_memory_limit() {
#if defined(__SANITIZE_ADDRESS__)
  return;  // AddressSanitizer maps terabytes of shadow memory: the sanitizer build runs without the limit
#else
  const double gib = memory_limit_gib();
  if (!(gib > 0)) return;
  const double bytes = gib * (1 << 30);
  rlimit r;
  if (getrlimit(RLIMIT_DATA, &r) != 0) return;
  const rlim_t want = bytes >= 1.8e19 ? RLIM_INFINITY : static_cast<rlim_t>(bytes);
  if (r.rlim_max != RLIM_INFINITY && want > r.rlim_max) return;  // the shell's limit is lower already
  r.rlim_cur = want;
  setrlimit(RLIMIT_DATA, &r);
#endif
}

}  // namespace

}  // namespace aoc::cli

int main(int argc, char** argv) {
  // Models on the large machines allocate and free many matrices of tens of MB (a tile's programming, an
  // op's tensors at every iteration). glibc maps each above 32 MB afresh, and the kernel zeroes every
  // page again: up to half the time of a program's run. Keep them on the heap, for reuse.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{
      "aoc " AOC_VERSION ": simulator and compiler for analog optical computers (AOC).\n"
      "Simulates the optical fixed-point loop z' = alpha*z + beta*W f(z) + x + b of the 16- and\n"
      "48-variable machines with their measured calibration (Microsoft's digital twin), fast; adds\n"
      "noise, converters and timing, estimates energy and latency, and imports implicit models."};
  // The version and the instruction sets the kernels run on (sim/isa.hpp; AOC_ISA picks a lower one).
  app.set_version_flag("--version", [] { return std::string("aoc " AOC_VERSION "\n") + aoc::isa::describe(); });
  app.add_option("--max-memory", aoc::cli::memory_limit_gib(),
                 "GiB a run may allocate (default: the machine's memory; 0: no limit); beyond it the run stops with one line. "
                 "Before the command (aoc --max-memory 200 run ...) or as AOC_MAX_MEMORY")
      ->envname("AOC_MAX_MEMORY")
      ->check(aoc::cli::non_negative() & CLI::Validator([](std::string& v) { return std::stod(v) <= 1e12 ? std::string() : "must be a number of GiB, at most 1e12"; }, "GIB"))
      ->default_str("the machine's memory");
  app.parse_complete_callback([] { aoc::cli::apply_memory_limit(); });
  app.require_subcommand(1);
  app.footer(
      "Examples:\n"
      "  aoc list                           what is bundled: machines, trained models, scenarios\n"
      "  aoc hw show aoc-48                 what the 48-variable machine's description holds\n"
      "  aoc verify-dt                      reproduce the twin's golden cases\n"
      "  aoc loop --hw aoc-48 --batch 64    a fixed-point run on seeded random weights\n"
      "  aoc run in.h5 -o out.h5 --noise    your weights and inputs, with the machine's noise\n"
      "  aoc estimate --hw aoc-scale        energy and latency, by component, against a GPU\n"
      "  aoc import config.json -o g.json   the graph of an implicit Mamba2 or Llama3 model\n"
      "  aoc bench                          iteration throughput vs a matrix-product-only loop\n"
      "  aoc sweep S.json -o r.h5           a design-space sweep on all cores (mpirun: many machines)\n"
      "  aoc pareto r.h5 --x energy --y accuracy   its Pareto-optimal points\n"
      "  aoc explore S.json -o f.h5         a search for the front (NSGA-II) instead of a grid\n"
      "  aoc report r.h5 -o report.html     its plots on one HTML page\n"
      "Run 'aoc SUBCOMMAND --help' for each one's options.");
  aoc::cli::add_hw(app);
  aoc::cli::add_verify_dt(app);
  aoc::cli::add_loop(app);
  aoc::cli::add_run(app);
  aoc::cli::add_import(app);
  aoc::cli::add_interpret(app);
  aoc::cli::add_compile(app);
  aoc::cli::add_check(app);
  aoc::cli::add_train(app);
  aoc::cli::add_task(app);
  aoc::cli::add_problem(app);
  aoc::cli::add_optimize(app);
  aoc::cli::add_retina(app);
  aoc::cli::add_bench(app);
  aoc::cli::add_estimate(app);
  aoc::cli::add_sweep(app);
  aoc::cli::add_pareto(app);
  aoc::cli::add_explore(app);
  aoc::cli::add_list(app);
  aoc::cli::add_report(app);
  try {
    // The kernels' instruction set, before any thread runs one: a bad AOC_ISA is one line here.
    aoc::isa::kernels();
    // An unknown command word: say so in one line, with the closest command.
    if (argc > 1 && argv[1][0] != '-') {
      std::vector<std::string> names;
      for (const CLI::App* c : app.get_subcommands({})) names.push_back(c->get_name());
      if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
        const std::string best = aoc::jsonr::closest(argv[1], names, std::max<std::size_t>(2, std::strlen(argv[1]) / 3));
        std::string all;
        for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
        throw aoc::Error("unknown command '" + std::string(argv[1]) + "'" +
                         (best.empty() ? "; the commands: " + all : " (did you mean " + best + "?)") + "; aoc --help says what each does");
      }
    }
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const aoc::Error& e) {
    std::fprintf(stderr, "aoc: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "aoc: error: out of memory: the run needed more than it may allocate (%.3g GiB; aoc --max-memory GIB raises it, 0 for no limit)\n",
                 aoc::cli::memory_limit_gib());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aoc: internal error: %s\n", e.what());
    return 2;
  }
  return aoc::cli::exit_status();
}
