// attnjit_spec_fuzz: the fuzz target over a bounded, deterministic corpus, for CI and for
// builds without libFuzzer (tests/fuzz/README.md). Exit status: 0 no finding, 1 findings
// (each printed with its stage, kind, message and document), 2 bad usage.
//
//   attnjit_spec_fuzz [options] [FILE|DIR]...   files first, then --count generated ones
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "corpus.h"
#include "fork_runner.h"
#include "spec_target.h"

namespace fs = std::filesystem;
using namespace attnjit::fuzz;

namespace {

struct Options {
    int count = 3000;
    unsigned seed = 1;
    int nvrtc_max = 24;    // NVRTC compiles in all
    int nvrtc_every = 40;  // of the generated valid documents, every k-th is compiled
    long only = -1;
    bool verbose = false;
    std::string write_corpus, findings_dir;
    RunnerOptions runner;
    std::vector<std::string> inputs;
};

const char* const kUsage = R"(usage: attnjit_spec_fuzz [options] [FILE|DIR]...
Runs every FILE (and every file in each DIR) and then --count generated documents through
the spec front door (tests/fuzz/spec_target.h); exits 1 if anything is found.
  --count N          generated documents (default 3000; 0: only the files)
  --seed S           generator seed (default 1)
  --nvrtc N          at most N NVRTC compiles in all (default 24): every valid FILE, then
  --nvrtc-every K    every K-th valid generated document (default 40)
  --timeout S        seconds a document may take, NVRTC apart, before it is a hang (default 30)
  --max-seconds S    start no document after S seconds (default 900)
  --only I           run document #I alone (the number a finding prints)
  --no-fork          run in this process: a crash ends the run (for a debugger)
  --findings-dir D   write each failing document to D/finding-<n>.json
  --write-corpus D   write the documents to D (libFuzzer seeds) and exit
  --verbose          print every document's outcome
)";

bool parse_args(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
        const char* v = nullptr;
        if (a == "--count" && (v = value())) o.count = std::atoi(v);
        else if (a == "--seed" && (v = value())) o.seed = static_cast<unsigned>(std::strtoul(v, nullptr, 10));
        else if (a == "--nvrtc" && (v = value())) o.nvrtc_max = std::atoi(v);
        else if (a == "--nvrtc-every" && (v = value())) o.nvrtc_every = std::max(1, std::atoi(v));
        else if (a == "--timeout" && (v = value())) o.runner.timeout_s = std::atof(v);
        else if (a == "--max-seconds" && (v = value())) o.runner.budget_s = std::atof(v);
        else if (a == "--only" && (v = value())) o.only = std::atol(v);
        else if (a == "--findings-dir" && (v = value())) o.findings_dir = v;
        else if (a == "--write-corpus" && (v = value())) o.write_corpus = v;
        else if (a == "--no-fork") o.runner.fork = false;
        else if (a == "--verbose") o.verbose = true;
        else if (!a.empty() && a[0] != '-') o.inputs.push_back(a);
        else return false;
    }
    return true;
}

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::vector<Document> read_inputs(const std::vector<std::string>& inputs) {
    std::vector<Document> docs;
    for (const auto& in : inputs) {
        std::vector<fs::path> files;
        if (fs::is_directory(in)) {
            for (const auto& e : fs::directory_iterator(in))
                if (e.is_regular_file()) files.push_back(e.path());
            std::sort(files.begin(), files.end());
        } else if (fs::is_regular_file(in)) {
            files.push_back(in);
        } else {
            std::cerr << "attnjit_spec_fuzz: " << in << " is neither a file nor a directory\n";
            std::exit(2);
        }
        for (const auto& f : files) docs.push_back({f.string(), read_file(f)});
    }
    return docs;
}

// Which valid documents NVRTC compiles. The same counters live in the parent and in each
// child (a new child inherits the parent's, which the parent keeps from the outcomes).
struct Sampling {
    size_t files = 0;
    int max = 0, every = 1, compiled = 0, valid_generated = 0;
    bool take(size_t index) const {
        if (compiled >= max) return false;
        return index < files || (valid_generated + 1) % every == 0;
    }
    void count(size_t index, const Outcome& o) {
        compiled += o.compiled;
        if (index >= files && o.valid) ++valid_generated;
    }
};

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse_args(argc, argv, o)) {
        std::cerr << kUsage;
        return 2;
    }
    prepare_environment();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Document> docs = read_inputs(o.inputs);
    const size_t files = docs.size();
    for (auto& d : generate_corpus(o.seed, o.count, docs)) docs.push_back(std::move(d));
    if (!o.write_corpus.empty()) {
        fs::create_directories(o.write_corpus);
        for (size_t i = 0; i < docs.size(); ++i)
            std::ofstream(fs::path(o.write_corpus) / ("doc-" + std::to_string(i) + ".json"), std::ios::binary)
                << docs[i].text;
        std::cout << "wrote " << docs.size() << " documents to " << o.write_corpus << "\n";
        return 0;
    }
    if (o.only >= 0) {
        if (static_cast<size_t>(o.only) >= docs.size()) {
            std::cerr << "attnjit_spec_fuzz: --only " << o.only << ": there are " << docs.size() << " documents\n";
            return 2;
        }
        docs = {docs[static_cast<size_t>(o.only)]};
    }

    // A document run alone is compiled like a file: its NVRTC verdict is part of the finding.
    Sampling sampling{o.only >= 0 ? 1 : files, o.nvrtc_max, o.nvrtc_every};
    auto run_one = [&](size_t i) {
        Outcome r = check_document(docs[i].text, [&] {
            if (!sampling.take(i)) return false;
            note_slow_stage();
            return true;
        });
        sampling.count(i, r);  // in the process that runs the documents
        return r;
    };
    std::vector<std::string> findings;
    std::map<std::string, int> by_kind;
    int valid = 0, user_errors = 0;
    auto on_result = [&](size_t i, const Outcome& r) {
        if (o.runner.fork && i != SIZE_MAX) sampling.count(i, r);  // the parent's copy, for the next child
        valid += r.valid;
        user_errors += !r.rejection.empty();
        const size_t n = o.only >= 0 ? static_cast<size_t>(o.only) : i;
        if (o.verbose && i != SIZE_MAX)
            std::cout << "#" << n << " " << docs[i].name << ": "
                      << (r.finding ? "FINDING" : r.valid ? (r.compiled ? "valid, compiled" : "valid") : "user error")
                      << "\n";
        if (!r.finding) return;
        ++by_kind[r.finding->stage + ": " + r.finding->kind];
        std::ostringstream s;
        if (i == SIZE_MAX) {
            s << "FINDING stage: " << r.finding->stage << "\n        kind:  " << r.finding->kind << "\n        "
              << r.finding->message << "\n";
        } else {
            s << "=== finding " << findings.size() + 1 << ": document #" << n << " (" << docs[i].name
              << "); rerun: attnjit_spec_fuzz --seed " << o.seed << " --count " << o.count << " --only " << n
              << " [the same FILEs]\n"
              << describe(*r.finding, docs[i].text);
            if (!o.findings_dir.empty()) {
                fs::create_directories(o.findings_dir);
                const fs::path p = fs::path(o.findings_dir) / ("finding-" + std::to_string(findings.size() + 1) + ".json");
                std::ofstream(p, std::ios::binary) << docs[i].text;
                s << "        written to " << p.string() << "\n";
            }
        }
        std::cout << s.str() << std::flush;
        findings.push_back(s.str());
    };
    const size_t ran = run_documents(docs.size(), run_one, on_result, o.runner);

    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "\nattnjit_spec_fuzz: " << ran << " of " << docs.size() << " documents (" << std::min(files, docs.size())
              << " from files, seed " << o.seed << ") in " << static_cast<int>(seconds) << " s: " << valid
              << " valid specs, " << sampling.compiled << " compiled by NVRTC, " << user_errors << " user errors, "
              << findings.size() << " findings\n";
    if (ran < docs.size())
        std::cout << "attnjit_spec_fuzz: stopped by --max-seconds; " << docs.size() - ran << " documents did not run\n";
    for (const auto& [kind, n] : by_kind) std::cout << "  " << n << " x " << kind << "\n";
    return findings.empty() ? 0 : 1;
}
