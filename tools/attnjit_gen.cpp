// attnjit-gen: print what codegen makes of a named example spec (dsl/example_specs.h)
// or of a spec file in the JSON format (docs/spec_format.md).
//
//   attnjit-gen causal                      the generated CUDA translation unit
//   attnjit-gen alibi_causal --plan         the KernelPlan after lowering
//   attnjit-gen bias --layout               the Params layout the launcher packs
//   attnjit-gen document --dtype bf16 --head-dim 64 --tile 64,64,4,2
//   attnjit-gen --spec my_variant.json      the same for a spec file
//   attnjit-gen softcap_sliding_window --json   the spec as a JSON document
//   attnjit-gen --list                      the example names
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "dsl/example_specs.h"
#include "codegen/generate.h"
#include "codegen/lower.h"
#include "codegen/params_layout.h"
#include "dsl/spec_json.h"
#include "support/error.h"

using namespace attnjit;

namespace {

DType parse_dtype(const std::string& s) {
    static const std::map<std::string, DType> names = {{"f16", DType::f16}, {"bf16", DType::bf16}, {"f32", DType::f32}};
    auto it = names.find(s);
    user_check(it != names.end()) << "--dtype " << s << ": use f16, bf16 or f32";
    return it->second;
}

TileConfig parse_tile(const std::string& s) {
    TileConfig t{};
    char tail = 0;
    user_check(std::sscanf(s.c_str(), "%d,%d,%d,%d%c", &t.block_m, &t.block_n, &t.warps, &t.stages, &tail) == 4)
        << "--tile " << s << ": expected block_m,block_n,warps,stages, e.g. 128,64,4,2";
    return t;
}

KernelKind parse_kind(const std::string& s) {
    for (KernelKind k : {KernelKind::forward, KernelKind::backward_dkdv, KernelKind::backward_dq,
                         KernelKind::backward_stats, KernelKind::backward_fused, KernelKind::backward_dq_convert,
                         KernelKind::backward_sink_grad, KernelKind::latent_gemm})
        if (s == kernel_kind_name(k)) return k;
    user_error << "--kind " << s
               << ": use forward, backward_dkdv, backward_dq, backward_stats, backward_fused, backward_dq_convert, "
                  "backward_sink_grad (a spec with sinks) or latent_gemm";
    return KernelKind::forward;
}

dsl::AttentionSpec read_spec_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    user_check(in.good()) << "--spec " << path << ": cannot open the file";
    std::ostringstream text;
    text << in.rdbuf();
    return dsl::spec_from_json(text.str(), path);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"attnjit-gen: print the generated kernel source, plan or params layout of an example spec"};
    std::string name, dtype = "f16", tile, spec_file, arch = "sm_80", kind_name = "forward", mainloop_name;
    int head_dim = 128;
    bool plan = false, layout = false, list = false, json = false;
    auto* name_opt = app.add_option("spec", name, "example spec name (see --list)");
    auto* file_opt = app.add_option("--spec", spec_file, "read the spec from a JSON file (docs/spec_format.md)")
                         ->excludes(name_opt);
    app.add_option("--dtype", dtype, "Q/K/V element type of an example: f16, bf16, f32")
        ->capture_default_str()
        ->excludes(file_opt);
    app.add_option("--head-dim", head_dim, "head dim of Q/K and V of an example: a multiple of 8 from 8 to 256")
        ->capture_default_str()
        ->excludes(file_opt);
    app.add_option("--tile", tile, "block_m,block_n,warps,stages (default: the default tile for --arch)");
    app.add_option("--arch", arch, "target architecture: sm_80, sm_90a, ...")->capture_default_str();
    app.add_option("--kind", kind_name, "kernel kind: forward, backward_dkdv, backward_dq, backward_stats, backward_fused, backward_dq_convert, backward_sink_grad, latent_gemm")->capture_default_str();
    app.add_option("--mainloop", mainloop_name, "force a main loop: sm80, sm90, simt (default: attnjit's choice)")
        ->check(CLI::IsMember({"sm80", "sm90", "simt"}));
    auto* plan_flag = app.add_flag("--plan", plan, "print the KernelPlan instead of the source");
    auto* layout_flag =
        app.add_flag("--layout", layout, "print the ParamsLayout instead of the source")->excludes(plan_flag);
    app.add_flag("--json", json, "print the spec as a JSON document instead of the source")
        ->excludes(plan_flag)
        ->excludes(layout_flag);
    std::vector<std::string> grads;
    app.add_option("--grads", grads,
                   "captured tensors / runtime scalars whose gradients backward_dq computes (comma separated)")
        ->delimiter(',');
    app.add_flag("--list", list, "list the example specs");
    CLI11_PARSE(app, argc, argv);

    try {
        if (list) {
            for (const auto& n : dsl::example_names()) std::cout << n << "\n";
            return 0;
        }
        user_check(!name.empty() || !spec_file.empty())
            << "name an example spec (attnjit-gen --list shows them) or a spec file with --spec FILE";
        const dsl::AttentionSpec spec =
            spec_file.empty() ? dsl::example_spec(name, parse_dtype(dtype), head_dim) : read_spec_file(spec_file);
        const KernelKind kind = parse_kind(kind_name);
        const std::set<std::string> grad_set(grads.begin(), grads.end());
        if (json) {
            std::cout << dsl::spec_to_json(spec);
        } else if (plan) {
            std::cout << codegen::lower(spec, codegen::spec_inputs(spec), kind, grad_set) << "\n";
        } else if (layout) {
            spec.validate();
            if (grad_set.empty()) {
                std::cout << codegen::params_layout(spec, kind) << "\n";
            } else {
                const auto p = codegen::lower(spec, codegen::spec_inputs(spec), kind, grad_set);
                std::cout << codegen::plan_params_layout(p, kind) << "\n";
            }
        } else {
            std::optional<MainloopKind> mainloop;
            if (!mainloop_name.empty())
                mainloop = mainloop_name == "sm90"   ? MainloopKind::sm90
                           : mainloop_name == "sm80" ? MainloopKind::sm80
                                                     : MainloopKind::simt;
            const auto config = codegen::make_config(
                spec, kind, arch, tile.empty() ? std::nullopt : std::optional(parse_tile(tile)), mainloop);
            std::cout << codegen::generate(codegen::lower(spec, codegen::spec_inputs(spec), kind, grad_set), config, arch)
                             .source;
        }
    } catch (const UserError& e) {
        std::cerr << "attnjit-gen: " << e.what() << "\n";
        return 2;
    }
    return 0;
}
