// attnjit-aot: compiles ahead of time every kernel a deployment of some specs needs on some
// GPU architectures, into a kernel bundle (docs/aot.md) that a process uses without NVRTC.
//
//   attnjit-aot --specs causal.json alibi.json --arch sm_80,sm_90a --out kernels/
//   attnjit-aot --specs model.json --arch sm_90a --out build/bundle --cpp build/bundle.cpp --name model
//   attnjit-aot --specs model.json --arch sm_90a --tuning ~/.cache/attnjit --out build/bundle
//
// For each spec and arch: the forward and, where the spec returns its LSE (or --backward yes),
// the backward, each with the sm80 kernels its sm90 ones fall back to; compiled in parallel
// (-j), through the same path a process would take at run time, so the bundle holds the
// kernels under the keys that process looks for. With --tuning (the cache directory an
// autotuned process or attnjit-tune wrote its tuning database into), also the configurations the
// autotuner chose for those specs on GPUs of those archs, and the choices themselves, which a
// process with autotuning on then takes from the bundle. The bundle directory gets manifest.json and
// kernels/; --cpp also writes the C++ source that links it into a program
// (attnjit_add_kernel_bundle does both at build time).
#include <CLI/CLI.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "api/aot.h"
#include "codegen/kernel_config.h"
#include "dsl/spec_json.h"
#include "runtime/kernel_bundle.h"
#include "runtime/kernel_cache.h"
#include "runtime/tuning_db.h"
#include "support/error.h"
#include "tools/spec_file.h"
#include "tools/tool_main.h"
#include "tools/linked_bundle_source.h"
#include "tools/progress.h"

using namespace attnjit;

namespace {

std::vector<std::string> split_commas(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty()) out.push_back(item);
    return out;
}

std::string absolute(const std::string& path) {
    if (!path.empty() && path.front() == '/') return path;
    char cwd[4096];
    user_check(::getcwd(cwd, sizeof cwd) != nullptr) << "cannot read the working directory";
    return std::string(cwd) + "/" + path;
}

int run(int argc, char** argv) {
    CLI::App app{"attnjit-aot: compile every kernel some specs need on some GPU architectures into a kernel bundle "
                 "(docs/aot.md)"};
    std::vector<std::string> spec_files;
    std::string archs, out, cpp, name, backward = "auto", grads, tuning;
    int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    bool nondeterministic = false, quiet = false;
    app.add_option("--specs", spec_files, "spec files in the JSON format (docs/spec_format.md)")->required();
    app.add_option("--arch", archs, "GPU architectures, comma-separated, e.g. sm_80,sm_90a")->required();
    app.add_option("--out", out, "the bundle directory to write (manifest.json, kernels/)")->required();
    app.add_option("--tuning", tuning,
                   "a cache directory whose tuning database (ATTNJIT_AUTOTUNE, attnjit-tune) adds the tuned "
                   "configurations of these specs and the choices (docs/autotune.md)");
    app.add_option("--cpp", cpp, "also write the C++ source that links the bundle into a program");
    app.add_option("--name", name, "the bundle's name in messages and symbols (default: the --out directory's name)");
    app.add_option("-j,--jobs", jobs, "specs x archs compiled at once (default: the CPU count)")->check(CLI::PositiveNumber);
    app.add_option("--backward", backward, "the backward's kernels: auto (specs that return their LSE), yes, no")
        ->check(CLI::IsMember({"auto", "yes", "no"}));
    app.add_option("--grads", grads, "the backward's gradients of captured tensors and scalars, comma-separated");
    app.add_flag("--nondeterministic", nondeterministic, "the backward that adds dQ in any order (CompileOptions)");
    app.add_flag("-q,--quiet", quiet, "no progress");
    CLI11_PARSE(app, argc, argv);

    const std::vector<std::string> arch_list = split_commas(archs);
    user_check(!arch_list.empty()) << "--arch " << archs << ": name at least one architecture, e.g. sm_90a";
    for (const std::string& arch : arch_list) codegen::supported_sm_version(arch);  // a usage mistake: before any job
    if (name.empty()) {
        std::string dir = out;
        while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
        name = dir.substr(dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/') + 1);
    }
    std::vector<std::pair<dsl::AttentionSpec, std::string>> specs;
    for (const std::string& file : spec_files)
        specs.emplace_back(dsl::spec_from_json(tools::read_spec_file(file), file), file);

    // The tuning database's entries, read once (attnjit-aot --tuning).
    std::optional<std::vector<runtime::TuningDb::Entry>> tuned_entries;
    if (!tuning.empty()) {
        const runtime::TuningDb db(tuning);
        struct stat st{};
        user_check(::stat(db.directory().c_str(), &st) == 0 && S_ISDIR(st.st_mode))
            << "--tuning " << tuning << ": there is no tuning database in it (" << db.directory()
            << " is not a directory); give the cache directory (ATTNJIT_CACHE_DIR) that a process with "
               "ATTNJIT_AUTOTUNE=1 or attnjit-tune wrote to";
        tuned_entries = db.entries();
    }

    api::AotOptions options;
    if (backward != "auto") options.backward = backward == "yes";
    for (const std::string& g : split_commas(grads)) options.grads.insert(g);
    options.deterministic = !nondeterministic;

    // Every (spec, arch) on a pool of -j threads; each compiles its kernels (a backward's at once).
    struct Job {
        size_t spec;
        std::string arch;
        std::string error;
        std::vector<runtime::BundleTuning> tuned;
    };
    std::vector<Job> work;
    for (size_t s = 0; s < specs.size(); ++s)
        for (const std::string& arch : arch_list) work.push_back({s, arch, "", {}});
    tools::Progress progress(work.size(), quiet);
    std::atomic<size_t> next{0};
    auto worker = [&] {
        for (size_t i = next++; i < work.size(); i = next++) {
            Job& job = work[i];
            const std::string& file = specs[job.spec].second;
            try {
                std::string what = api::compile_for_bundle(specs[job.spec].first, job.arch, options);
                if (tuned_entries) {
                    job.tuned = api::compile_tuned_for_bundle(specs[job.spec].first, job.arch, *tuned_entries,
                                                              runtime::KernelCache::global().toolchain(), options);
                    what += ", " + std::to_string(job.tuned.size()) + " tuned buckets";
                }
                progress.done(file + " " + job.arch + ": " + what);
            } catch (const std::exception& e) {
                job.error = e.what();
                progress.done(file + " " + job.arch + ": failed");
            }
        }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < std::min<int>(jobs, static_cast<int>(work.size())); ++t) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
    int failed = 0;
    for (const Job& job : work)
        if (!job.error.empty()) {
            std::cerr << "attnjit-aot: " << specs[job.spec].second << " for " << job.arch << ": " << job.error << "\n";
            ++failed;
        }
    if (failed) {
        std::cerr << "attnjit-aot: " << failed << " of " << work.size() << " spec x arch compiles failed; no bundle written\n";
        return 1;
    }

    std::vector<runtime::BundleTuning> tuned;
    for (Job& job : work) tuned.insert(tuned.end(), job.tuned.begin(), job.tuned.end());
    const runtime::BundleManifest manifest = api::write_bundle_of_compiled(out, specs, std::move(tuned));
    if (!cpp.empty()) {
        const std::string source = tools::linked_bundle_source(name, absolute(out), manifest);
        std::ofstream f(cpp, std::ios::binary | std::ios::trunc);
        f << source;
        f.close();
        environment_check(f.good()) << "cannot write --cpp " << cpp;
    }
    if (!quiet)
        std::cerr << "attnjit-aot: bundle " << out << ": " << manifest.kernels.size() << " kernels for "
                  << specs.size() << " specs x " << arch_list.size() << " archs"
                  << (tuned_entries ? ", " + std::to_string(manifest.tuning.size()) + " tuned buckets" : "")
                  << (cpp.empty() ? "" : ", " + cpp)
                  << "\n";
    return 0;
}

}  // namespace

int main(int argc, char** argv) { return tools::tool_main(argc, argv, run); }
