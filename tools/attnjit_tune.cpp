// attnjit-tune: tunes the tile of some specs over some shapes on this GPU, into the tuning
// database that programs with autotuning on take their choices from (docs/autotune.md);
// --backward tunes what training runs instead (the forward returning LSE, and its backward);
// --report prints what the database holds.
//
//   attnjit-tune --specs causal.json alibi.json --shapes 4x16x4096x4096,1x16x16384x16384
//   attnjit-tune --specs window.json --shapes 8x32x2048x2048 --scalar window=256
//   attnjit-tune --specs softcap.json --shapes 4x16x4096x4096 --backward
//   attnjit-tune --report
//
// A shape is BxHxNqxNk (H query heads; a spec that fixes its heads keeps them). Q, K, V (and
// dO) are filled with a constant, captured tensors are one element broadcast (stride 0) over
// every index (sinks, a gate, a band's alpha, a convolution's kernel in their shapes), and
// runtime scalars take --scalar name=value: timing needs the work, not the numbers. A
// broadcast bias tile cannot be read by the sm90 loop's bulk copies, so such a spec tunes its
// "_sm80" buckets, which a program with a real bias never asks for: tune those in the program
// itself. Latent projections are not tuned, nor backwards that compute gradients of captured
// tensors (the backward tuned here computes dQ, dK and dV: deterministically, as training's
// default, or with --nondeterministic adding dQ in any order).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "api/attention_backward.h"
#include "api/attnjit.h"
#include "api/autotune.h"
#include "codegen/kernel_config.h"
#include "dsl/spec_json.h"
#include "runtime/device.h"
#include "runtime/device_buffer.h"
#include "runtime/kernel_cache.h"
#include "runtime/tuning_db.h"
#include "support/error.h"
#include "tools/progress.h"
#include "tools/spec_file.h"
#include "tools/tool_main.h"

using namespace attnjit;

namespace {

struct Shape {
    int64_t b, h, nq, nk;
};

std::vector<Shape> parse_shapes(const std::string& text) {
    std::vector<Shape> out;
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, ',');) {
        Shape s{};
        char tail = 0;
        user_check(std::sscanf(item.c_str(), "%ldx%ldx%ldx%ld%c", &s.b, &s.h, &s.nq, &s.nk, &tail) == 4 && s.b > 0 &&
                   s.h > 0 && s.nq > 0 && s.nk > 0)
            << "--shapes " << item << ": write BxHxNqxNk with positive numbers, e.g. 4x16x4096x4096";
        out.push_back(s);
    }
    user_check(!out.empty()) << "--shapes: give at least one BxHxNqxNk";
    return out;
}

std::string ms(double seconds) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", 1e3 * seconds);
    return buf;
}

int report() {
    const runtime::TuningDb& db = api::tuning_db();
    const auto entries = db.entries();
    if (entries.empty()) {
        std::cout << "the tuning database " << (db.directory().empty() ? "(memory only)" : db.directory())
                  << " holds no results\n";
        return 0;
    }
    std::cout << "| spec | kind | GPU | bucket | default ms | tuned ms | speed-up | tuned configuration | candidates | "
                 "tuning s |\n|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& e : entries)
        for (const auto& [bucket, r] : e.buckets) {
            char speedup[16];
            std::snprintf(speedup, sizeof speedup, "%.2fx", r.seconds > 0 ? r.default_seconds / r.seconds : 0.0);
            std::cout << "| " << e.key.spec.substr(0, 12) << " | " << e.key.kind << " | " << e.key.device << " ("
                      << e.key.arch << ") | " << bucket << " | " << ms(r.default_seconds) << " | " << ms(r.seconds)
                      << " | " << speedup << " | " << mainloop_kind_name(r.mainloop) << " " << codegen::to_string(r.tile)
                      << r.schedule << " | " << r.candidates << " | " << r.tuning_seconds << " |\n";
        }
    return 0;
}

// Device buffers and arguments for timing one spec at one shape (the values: see the top).
struct TimingInputs {
    std::vector<runtime::DeviceBuffer> buffers;
    LaunchArgs fwd;
    GradArgs grads;  // with_grads only: dO, and dQ, dK, dV to write
};

TimingInputs timing_inputs(const AttentionSpec& spec, const Shape& s, const std::map<std::string, double>& scalars,
                           bool with_grads) {
    TimingInputs in;
    in.buffers.reserve(10);
    auto tensor = [&](DType dtype, std::vector<int64_t> shape, bool filled) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        in.buffers.emplace_back(static_cast<size_t>(n * dtype_size(dtype)));
        if (filled) in.buffers.back().fill_bytes(0x3c);  // 0x3c3c: a small positive f16 / bf16
        return TensorView::contiguous(in.buffers.back().data(), dtype, std::move(shape));
    };
    const int64_t hq = spec.q_heads() ? spec.q_heads() : s.h, hkv = spec.kv_heads() ? spec.kv_heads() : s.h;
    const int64_t dqk = spec.head_dim_qk(), dv = spec.head_dim_v();
    const DType dt = spec.dtype();
    LaunchArgs& a = in.fwd;
    a.q = tensor(dt, {s.b, hq, s.nq, dqk}, true);
    a.k = tensor(dt, {s.b, hkv, s.nk, dqk}, true);
    a.v = tensor(dt, {s.b, hkv, s.nk, dv}, true);
    a.o = tensor(dt, {s.b, hq, s.nq, dv}, false);
    if (spec.returns_lse()) a.lse = tensor(DType::f32, {s.b, hq, s.nq}, false);
    if (with_grads) {
        in.grads.d_o = tensor(dt, {s.b, hq, s.nq, dv}, true);
        in.grads.dq = tensor(dt, {s.b, hq, s.nq, dqk}, false);
        in.grads.dk = tensor(dt, {s.b, hkv, s.nk, dqk}, false);
        in.grads.dv = tensor(dt, {s.b, hkv, s.nk, dv}, false);
    }
    in.buffers.emplace_back(16);
    in.buffers.back().fill_bytes(0);
    void* const one = in.buffers.back().data();
    // The structural tensors have the shapes the launch checks ask for (one element
    // broadcast); every other captured tensor is broadcast over any index it is read at.
    const std::map<std::string, std::vector<int64_t>> structural = {
        {spec.sinks_name(), {hq}},
        {spec.reciprocal_band_alpha(), {hq}},
        {spec.gate_name(), {s.b, hq, s.nq, dv}},
        {spec.score_conv_name(), {hq, spec.score_conv_rows(), spec.score_conv_cols()}}};
    const codegen::SpecInputs inputs = spec_inputs(spec);
    const int64_t extent = std::max<int64_t>({s.b, hq, s.nq, s.nk, 4096});
    for (const auto& [name, info] : inputs.tensors) {
        const auto it = structural.find(name);
        const std::vector<int64_t> shape =
            it != structural.end() && !name.empty() ? it->second : std::vector<int64_t>(info.rank, extent);
        a.tensors[name] = TensorView{one, info.dtype, shape, std::vector<int64_t>(shape.size(), 0)};
    }
    for (const auto& [name, type] : inputs.scalars) a.scalars[name] = scalars.at(name);
    return in;
}

int run(int argc, char** argv) {
    CLI::App app{"attnjit-tune: tune the tile of some specs over some shapes on this GPU into the tuning database "
                 "(docs/autotune.md)"};
    std::vector<std::string> spec_files, scalar_args;
    std::string shapes;
    bool show_report = false, quiet = false, backward = false, nondeterministic = false;
    app.add_option("--specs", spec_files, "spec files in the JSON format (docs/spec_format.md)");
    app.add_option("--shapes", shapes, "BxHxNqxNk, comma-separated, e.g. 4x16x4096x4096,1x16x16384x16384");
    app.add_option("--scalar", scalar_args, "a runtime scalar's value for the timed runs, name=value (repeatable)");
    app.add_flag("--backward", backward,
                 "tune what training runs: each spec's forward returning LSE, and its backward (dQ, dK, dV)");
    app.add_flag("--nondeterministic", nondeterministic,
                 "with --backward: the backward that adds dQ in any order (CompileOptions.deterministic = false)");
    app.add_flag("--report", show_report, "print the tuning database: default and tuned time per case");
    app.add_flag("-q,--quiet", quiet, "no progress");
    CLI11_PARSE(app, argc, argv);
    if (show_report) return report();
    user_check(!spec_files.empty() && !shapes.empty())
        << "give --specs FILE... and --shapes BxHxNqxNk,... to tune, or --report to see the database";
    user_check(backward || !nondeterministic) << "--nondeterministic chooses a backward: give --backward too";
    const std::vector<Shape> shape_list = parse_shapes(shapes);
    std::map<std::string, double> scalars;
    for (const std::string& a : scalar_args) {
        const size_t eq = a.find('=');
        char* end = nullptr;
        const double v = eq == std::string::npos ? 0 : std::strtod(a.c_str() + eq + 1, &end);
        user_check(eq != std::string::npos && eq > 0 && end && *end == 0 && end != a.c_str() + eq + 1)
            << "--scalar " << a << ": write name=value, e.g. window=256";
        scalars[a.substr(0, eq)] = v;
    }
    // The specs first, so that a mistake in any file is told before any GPU work.
    std::vector<std::pair<AttentionSpec, std::string>> specs;
    for (const std::string& file : spec_files) {
        AttentionSpec spec = dsl::spec_from_json(tools::read_spec_file(file), file);
        user_check(!spec.has_latent()) << file << " has a latent projection, whose kernels are fixed: nothing to tune";
        for (const auto& [name, type] : spec_inputs(spec).scalars)
            user_check(scalars.count(name)) << file << " reads runtime scalar '" << name << "': give --scalar " << name
                                            << "=VALUE (a value the program runs with)";
        specs.emplace_back(backward ? spec.return_lse() : spec, file);
    }
    if (const auto why = runtime::why_no_gpu())
        environment_error << "attnjit-tune times kernels on this machine's GPU, and none is usable: " << *why;
    const size_t total = specs.size() * shape_list.size();
    tools::Progress progress(total, quiet);
    for (const auto& [spec, file] : specs) {
        CompileOptions tune;
        tune.autotune = true;
        const Attention attn(spec, tune);
        std::optional<AttentionBackward> attn_backward;
        if (backward) {
            CompileOptions tune_backward = tune;
            tune_backward.deterministic = !nondeterministic;
            attn_backward.emplace(spec, tune_backward);
        }
        for (const Shape& s : shape_list) {
            TimingInputs in = timing_inputs(spec, s, scalars, backward);
            attn(in.fwd);  // the first launch of the bucket tunes
            if (attn_backward) (*attn_backward)(in.fwd, in.grads);  // and the backward's
            runtime::synchronize();
            std::ostringstream line;
            line << file << (backward ? " fwd+bwd " : " ") << s.b << "x" << in.fwd.q.shape[1] << "x" << s.nq << "x"
                 << s.nk << " (" << api::shape_bucket(s.nq, s.nk) << ")";
            progress.done(line.str());
        }
    }
    if (!quiet) std::cerr << "attnjit-tune: " << total << " cases tuned into " << api::tuning_db().directory() << "\n";
    return 0;
}

}  // namespace

int main(int argc, char** argv) { return tools::tool_main(argc, argv, run); }
