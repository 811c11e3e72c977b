#include "codegen/emit_variant.h"

#include <vector>

#include "codegen/cuda_emitter.h"
#include "codegen/params_layout.h"
#include "dsl/printer.h"

namespace attnjit::codegen {

namespace {

class VariantEmitter {
public:
    VariantEmitter(SourceWriter& w, const KernelPlan& plan) : w_(w), plan_(plan), all_(plan.all_bindings()) {
        for (const auto& b : plan.head) names_.temps[b.name] = "hd." + b.name;
        for (const auto& b : plan.row) names_.temps[b.name] = "r." + b.name;
        for (const auto& b : all_)
            if (b.level == Level::Element) names_.temps[b.name] = b.name;
    }

    std::string dsl_text(const dsl::Expr& e) const { return dsl::to_string(inline_bindings(e, all_)); }

    // `// dsl text` then `target = value;` for each binding.
    void bindings(const Bindings& bs, const std::string& target_prefix, bool declare) {
        for (const auto& b : bs) {
            w_.line("// " + dsl_text(b.value));
            std::string lhs = declare ? std::string("const ") + cuda_type(b.value.type()) + " " + b.name
                                      : target_prefix + b.name;
            w_.line(lhs + " = " + emit_expr(b.value, names_) + ";");
        }
    }

    // True when any expression the Variant emits satisfies `uses` (uses_float_min_max, uses_tanh).
    bool any_expr(bool (*uses)(const dsl::Expr&)) const {
        for (const auto& b : all_)
            if (uses(b.value)) return true;
        for (const auto& g : plan_.grad_sites)
            if (uses(g.partial)) return true;
        return (plan_.has_score_mod() && uses(plan_.score_mod)) || (plan_.has_mask() && uses(plan_.mask)) ||
               (plan_.has_score_grad() && uses(plan_.d_score));
    }

    // The float value of a structural tensor's element (sinks, gate, score_conv): the
    // indices times the strides the launcher packed.
    static std::string element_read(const std::string& name, const std::vector<std::string>& index) {
        const std::string f = "p." + tensor_field(name);
        std::string offset;
        for (size_t d = 0; d < index.size(); ++d)
            offset += (d ? " + " : "") + index[d] + " * " + f + ".stride[" + std::to_string(d) + "]";
        return "attnjit::to_float(" + f + ".ptr[" + offset + "])";
    }

    // Where a (batch, head)'s bias tile starts, and its (q, k) strides.
    void bias_tile_hook() {
        const BiasTile& bt = *plan_.bias_tile;
        std::vector<std::string> idx;
        for (const auto& i : bt.leading) {
            const std::string text = emit_expr(i, names_);
            idx.push_back(i.as<dsl::Const>() || i.as<dsl::Var>() ? text : "(" + text + ")");
        }
        const std::string f = "p." + tensor_field(bt.tensor);
        const size_t n = bt.leading.size();
        std::string lead;
        for (const auto& i : bt.leading) lead += dsl::to_string(i) + ", ";
        w_.line("// score_mod's bias tile: " + bt.tensor + "[" + lead + "q_idx, kv_idx] (common/bias_tile.cuh).");
        w_.open(std::string("__device__ static attnjit::BiasTileRef<BiasTileElement> bias_tile(const Params& p, const "
                            "Head& hd)"));
        w_.line("return {" + f + ".ptr + (" + tensor_offset(bt.tensor, idx) + "), " + f + ".stride[" +
                std::to_string(n) + "], " + f + ".stride[" + std::to_string(n + 1) + "], " + f + ".ptr};");
        w_.close();
        w_.line();
    }

    // Where query head h's latent projections start, and their row strides (the launcher
    // checked their columns contiguous and 16-byte aligned).
    void latent_hook() {
        const std::string& wq = plan_.spec.latent_w_qlat();
        const std::string& wv = plan_.spec.latent_w_vup();
        const std::string fq = "p." + tensor_field(wq), fv = "p." + tensor_field(wv);
        w_.line("// The latent projections of query head h: " + wq + "[h] [Dqk x L] and " + wv + "[h] [L x Dv].");
        w_.open(std::string("__device__ static attnjit::LatentWeights<") + cuda_elem_type(plan_.spec.dtype()) +
                "> latent_weights(const Params& p, int h)");
        w_.line("return {" + fq + ".ptr + h * " + fq + ".stride[0], " + fq + ".stride[1], " + fv + ".ptr + h * " + fv +
                ".stride[0], " + fv + ".stride[1]};");
        w_.close();
        w_.line();
    }

    void fields(const Bindings& bs) {
        for (const auto& b : bs)
            w_.line(std::string(cuda_type(b.value.type())) + " " + b.name + ";  // " + dsl_text(b.value));
    }

    void run() {
        const bool has_sm = plan_.has_score_mod(), has_mask = plan_.has_mask();
        w_.open("struct Variant : attnjit::VariantDefaults");
        w_.line(std::string("static constexpr bool kHasScoreMod = ") + (has_sm ? "true" : "false") + ";");
        w_.line(std::string("static constexpr bool kHasMask = ") + (has_mask ? "true" : "false") + ";");
        w_.line(std::string("static constexpr bool kCanClassify = ") + (plan_.classify.can_classify ? "true" : "false") + ";");
        w_.line(std::string("static constexpr bool kClassifyReadsMemory = ") +
                (plan_.classify.can_classify && plan_.classify.reads_memory ? "true" : "false") + ";");
        if (plan_.gradients)
            w_.line(std::string("static constexpr bool kHasScoreGrad = ") + (plan_.has_score_grad() ? "true" : "false") +
                    ";");
        if (plan_.has_sinks()) {
            w_.line("static constexpr bool kHasSink = true;");
            w_.line(std::string("using SinkElement = ") + cuda_elem_type(plan_.spec.sinks_dtype()) + ";");
        }
        if (plan_.output_gate) w_.line("static constexpr bool kHasOutputTransform = true;");
        if (plan_.bias_tile) {
            w_.line("static constexpr bool kHasBiasTile = true;");
            w_.line(std::string("using BiasTileElement = ") + cuda_elem_type(plan_.bias_tile->dtype) + ";");
            if (plan_.bias_tile->batch_invariant) w_.line("static constexpr bool kBiasTileBatchInvariant = true;");
        }
        if (plan_.score_conv) {
            w_.line("static constexpr int kScoreConvRows = " + std::to_string(plan_.spec.score_conv_rows()) + ";");
            w_.line("static constexpr int kScoreConvCols = " + std::to_string(plan_.spec.score_conv_cols()) + ";");
            w_.line(std::string("using ScoreConvElement = ") + cuda_elem_type(plan_.spec.score_conv_dtype()) + ";");
            if (plan_.conv_mask.defined()) w_.line("static constexpr bool kScoreConvMask = true;");
        }
        if (plan_.reciprocal_band) {
            w_.line("static constexpr int kRecipBandWidth = " + std::to_string(plan_.spec.reciprocal_band_width()) + ";");
            w_.line(std::string("static constexpr bool kRecipBandCausal = ") +
                    (plan_.spec.reciprocal_band_causal() ? "true" : "false") + ";");
        }
        if (plan_.latent) w_.line("static constexpr int kLatentDim = " + std::to_string(plan_.spec.latent_dim()) + ";");
        if (plan_.grad_planes) w_.line("static constexpr bool kInputGradPlanes = true;");
        if (plan_.has_input_grads()) {
            w_.line("static constexpr bool kInputGrads = true;");
            w_.line(std::string("static constexpr bool kInputGradZeroFill = ") +
                    (plan_.grad_stores() && plan_.classify.can_classify ? "true" : "false") + ";");
            w_.line("static constexpr int kInputGradAccums = " + std::to_string(plan_.grad_accums()) + ";");
            w_.line("static constexpr int kInputGradOutputs = " + std::to_string(plan_.grad_accum_outputs()) + ";");
            if (plan_.grad_table_output() >= 0)
                w_.line("static constexpr int kInputGradTableOutput = " + std::to_string(plan_.grad_table_output()) + ";");
            if (plan_.grad_query_sites() > 0)
                w_.line("static constexpr int kInputGradQuerySites = " + std::to_string(plan_.grad_query_sites()) + ";");
            if (plan_.grad_batch_sum()) w_.line("static constexpr bool kInputGradBatchSum = true;");
        }
        if (plan_.grad_planes && plan_.grad_key_sites() > 0)
            w_.line("static constexpr int kInputGradKeySites = " + std::to_string(plan_.grad_key_sites()) + ";");
        w_.line();
        if (any_expr(uses_float_min_max)) {
            w_.line("// min / max that keep NaN (the DSL's meaning; fminf / fmaxf drop it).");
            for (const char* helper : kNanMinMaxHelpers) w_.line(helper);
            w_.line();
        }
        if (any_expr(uses_tanh)) {
            const bool approx = plan_.spec.dtype() != DType::f32;
            w_.line(approx ? "// tanh: the hardware's approximation (relative error about 2^-11; f16 / bf16 inputs "
                             "carry 2^-11 / 2^-8)."
                           : "// tanh: exact to fp32 (an f32 spec).");
            for (const char* line : tanh_helper(approx)) w_.line(line);
            w_.line();
        }
        w_.line("// Computed once per (batch, head).");
        w_.open("struct Head");
        w_.line("int b, h, kvh;");
        fields(plan_.head);
        w_.close(";");
        w_.line("// Computed once per query row.");
        if (plan_.row.empty()) {
            w_.line("struct Row {};");
        } else {
            w_.open("struct Row");
            fields(plan_.row);
            w_.close(";");
        }
        w_.line();

        w_.open("__device__ static Head make_head(const Params& p, int b, int h, int kvh)");
        w_.line("Head hd;");
        w_.line("hd.b = b;");
        w_.line("hd.h = h;");
        w_.line("hd.kvh = kvh;");
        bindings(plan_.head, "hd.", false);
        w_.line("return hd;");
        w_.close();
        w_.line();

        w_.open("__device__ static Row make_row(const Params& p, const Head& hd, int q)");
        w_.line("Row r;");
        bindings(plan_.row, "r.", false);
        w_.line("return r;");
        w_.close();
        w_.line();

        if (plan_.bias_tile) bias_tile_hook();
        w_.open(std::string("__device__ static float score_mod(const Params& p, const Head& hd, const Row& r, float s, "
                            "int q, int k") +
                (plan_.bias_tile ? ", float tile_bias)" : ")"));
        // The bias tile's reads are the argument tile_bias (common/bias_tile.cuh).
        const EmitNames saved = names_;
        if (plan_.bias_tile) {
            names_.bias_tile_tensor = plan_.bias_tile->tensor;
            names_.bias_tile_value = "tile_bias";
        }
        bindings(plan_.score_bindings, "", true);
        if (has_sm) {
            w_.line("// " + dsl_text(plan_.score_mod));
            w_.line("return " + emit_expr(plan_.score_mod, names_) + ";");
        }
        names_ = saved;
        if (!has_sm) {
            w_.line("return s;  // no score_mod");
        }
        w_.close();
        w_.line();

        w_.open("__device__ static bool mask(const Params& p, const Head& hd, const Row& r, int q, int k)");
        bindings(plan_.mask_bindings, "", true);
        if (has_mask) {
            w_.line("// " + dsl_text(plan_.mask));
            w_.line("return " + emit_expr(plan_.mask, names_) + ";");
        } else {
            w_.line("return true;  // no mask");
        }
        w_.close();
        w_.line();

        if (plan_.has_sinks()) {
            w_.line("// Attention sink logit of query head h: " + plan_.spec.sinks_name() + "[h].");
            w_.open("__device__ static float sink(const Params& p, int h)");
            w_.line("return " + element_read(plan_.spec.sinks_name(), {"h"}) + ";");
            w_.close();
            w_.line();
        }

        if (plan_.reciprocal_band) {
            w_.line("// The reciprocal band's weight of query head h: " + plan_.spec.reciprocal_band_alpha() + "[h].");
            w_.open("__device__ static float recip_band_alpha(const Params& p, int h)");
            w_.line("return " + element_read(plan_.spec.reciprocal_band_alpha(), {"h"}) + ";");
            w_.close();
            w_.line();
        }

        if (plan_.latent) latent_hook();

        if (plan_.output_gate) {
            w_.line("// The output gate: o * sigmoid(" + plan_.spec.gate_name() + "[b][h][q][d]).");
            w_.open("__device__ static float transform_output(const Params& p, const Head& hd, const Row&, float o, int q, int d)");
            w_.line("const float g = " + element_read(plan_.spec.gate_name(), {"hd.b", "hd.h", "q", "d"}) + ";");
            w_.line("return o / (1.f + __expf(-g));");
            w_.close();
            w_.line();
        }

        if (plan_.score_conv) {
            w_.line("// The score convolution's kernel: " + plan_.spec.score_conv_name() + "[h][a][b].");
            w_.open("__device__ static float score_conv_weight(const Params& p, int h, int a, int b)");
            w_.line("return " + element_read(plan_.spec.score_conv_name(), {"h", "a", "b"}) + ";");
            w_.close();
            w_.line();
        }
        if (plan_.conv_mask.defined()) {
            w_.line("// The spec's mask alone (mask() adds the causal part): it gates the convolution's taps.");
            expression_hook("__device__ static bool score_conv_mask(const Params& p, const Head& hd, const Row& r, int q, int k)",
                            plan_.conv_mask_bindings, plan_.conv_mask);
            w_.line("// Interval analysis of score_conv_mask alone: kFull spares a tile the mask's bits.");
            classify_hook("score_conv_mask_classify", plan_.conv_mask_classify);
            w_.line();
        }

        if (plan_.has_score_grad()) {
            w_.line("// d score_mod / d s (codegen/autodiff.h).");
            expression_hook("__device__ static float d_score(const Params& p, const Head& hd, const Row& r, float s, int q, int k)",
                            plan_.d_score_bindings, plan_.d_score);
        }

        if (plan_.has_input_grads()) input_grad_hooks();
        if (plan_.grad_planes) plane_hooks();
        if (plan_.grad_planes && plan_.grad_key_sites() > 0) key_grad_hooks();

        w_.line("// Interval analysis of the mask over q in [q0, q1], k in [k0, k1] (codegen/mask_analysis.h).");
        classify_hook("classify", plan_.classify);  // lower() ran mask_analysis
        w_.close(";");
    }

private:
    // A hook whose body is one lowered expression (its element bindings first), the DSL
    // text above the return.
    void expression_hook(const std::string& signature, const Bindings& b, const dsl::Expr& e) {
        w_.open(signature);
        bindings(b, "", true);
        w_.line("// " + dsl_text(e));
        w_.line("return " + emit_expr(e, names_) + ";");
        w_.close();
        w_.line();
    }

    // `template <class Ctx> TileClass name(p, hd, q0, q1, k0, k1, ctx)`, mask_analysis's body.
    void classify_hook(const std::string& name, const ClassifyCode& code) {
        w_.line("template <class Ctx>");
        w_.open("__device__ static attnjit::TileClass " + name +
                "(const Params& p, const Head& hd, int q0, int q1, int k0, int k1, Ctx& ctx)");
        for (const auto& l : code.lines) w_.line(l);
        w_.close();
    }

    const InputGradOutput& output(const InputGradSite& g) const {
        return plan_.grad_outputs[static_cast<size_t>(g.output)];
    }

    // `const long long i<d> = ...;` for the read's indices; returns the bounds test
    // (a stride-0 dimension of the gradient takes any index).
    std::string site_indices(const InputGradSite& g, const std::string& prefix) {
        const auto* load = g.read.as<dsl::TensorLoad>();
        const std::string f = "p." + grad_field(output(g).name);
        std::string in_bounds;
        for (size_t d = 0; d < load->indices.size(); ++d) {
            const std::string i = prefix + std::to_string(d), ds = std::to_string(d);
            w_.line("const long long " + i + " = " + emit_expr(load->indices[d], names_) + ";");
            in_bounds += std::string(d ? " && " : "") + "(" + f + ".stride[" + ds + "] == 0 || (" + i + " >= 0 && " + i + " < " + f + ".shape[" +
                         ds + "]))";
        }
        return in_bounds.empty() ? "true" : in_bounds;
    }

    // The dense index of the element (stride-0 dimensions counted once) from the indices.
    std::string dense_index(const InputGradSite& g, const std::string& prefix) const {
        const auto* load = g.read.as<dsl::TensorLoad>();
        const std::string f = "p." + grad_field(output(g).name);
        std::string dense = "0";
        for (size_t d = 0; d < load->indices.size(); ++d) {
            const std::string ds = std::to_string(d);
            dense = "(" + dense + ") * (" + f + ".stride[" + ds + "] == 0 ? 1 : " + f + ".shape[" + ds + "]) + (" + f +
                    ".stride[" + ds + "] == 0 ? 0 : " + prefix + ds + ")";
        }
        return dense;
    }

    // `value` into a stored site's element: in the tensor's dtype, or into the fp32 plane of
    // this (b, h) when the launch gives planes (backward/grad_args.h).
    void store_element(const InputGradSite& g, const std::string& pre, const std::string& value) {
        const InputGradOutput& o = output(g);
        const std::string f = "p." + grad_field(o.name);
        w_.line("if (" + f + ".planes == nullptr)");
        w_.line("    " + direct_store(g, pre, value));
        w_.line("else");
        w_.line("    " + f + ".planes[" + plane_index(f) + " * " + f + ".plane_elems + " + dense_index(g, pre) + "] = " +
                value + ";");
    }

    // `value` into the site's element of the gradient itself, in the tensor's dtype.
    std::string direct_store(const InputGradSite& g, const std::string& pre, const std::string& value) const {
        const InputGradOutput& o = output(g);
        return "p." + grad_field(o.name) + ".ptr[" + site_offset(g, pre) + "] = attnjit::FromFloat<" +
               cuda_elem_type(o.dtype) + ">::cvt(" + value + ");";
    }

    static std::string plane_index(const std::string& f) {
        return "((" + f + ".plane_b ? hd.b : 0) * (" + f + ".plane_h ? p.args.q_heads : 1) + (" + f +
               ".plane_h ? hd.h : 0))";
    }

    // backward_dkdv: every element of each stored gradient that went through planes, as
    // the plane-order sum, over e = first, first + step, ...
    void plane_hooks() {
        w_.line("// Elementwise gradients summed over planes (backward/grad_args.h), after backward_dq.");
        w_.open("__device__ static void finish_input_grad_planes(const Params& p, long long first, long long step)");
        for (const auto& o : plan_.grad_outputs)
            if (o.stored && !o.per_key) plane_sum(o, false);
        w_.close();
        w_.line();
    }

    // The plane-order sum of every element of stored output o, over e = first, first +
    // step, ...; bypass_l1: load the planes past L1 (the last backward_dkdv CTA reads what
    // other CTAs of the same launch wrote).
    void plane_sum(const InputGradOutput& o, bool bypass_l1) {
        const std::string f = "p." + grad_field(o.name);
        w_.line("// '" + o.name + "'");
        w_.open("if (" + f + ".planes != nullptr)");
        w_.line("const long long n = " + f + ".plane_elems;");
        w_.line("const int planes = (" + f + ".plane_b ? p.args.batch : 1) * (" + f +
                ".plane_h ? p.args.q_heads : 1);");
        w_.open("for (long long e = first; e < n; e += step)");
        w_.line("float sum = 0.f;");
        if (bypass_l1)
            w_.line("for (int i = 0; i < planes; ++i) sum += __ldcg(" + f + ".planes + i * n + e);");
        else
            w_.line("for (int i = 0; i < planes; ++i) sum += " + f + ".planes[i * n + e];");
        w_.line("long long dense = e, off = 0;");
        for (int d = o.rank - 1; d >= 0; --d) {
            const std::string ds = std::to_string(d);
            w_.open("if (" + f + ".stride[" + ds + "] != 0)");
            w_.line("off += dense % " + f + ".shape[" + ds + "] * " + f + ".stride[" + ds + "];");
            w_.line("dense /= " + f + ".shape[" + ds + "];");
            w_.close();
        }
        w_.line(f + ".ptr[off] = attnjit::FromFloat<" + std::string(cuda_elem_type(o.dtype)) + ">::cvt(sum);");
        w_.close();
        w_.close();
    }

    // One row sum of a per-query (coord "q") or per-key (coord "k") site n into its element
    // of this (b, h): direct, or into the (b, h) plane (backward/grad_args.h).
    void row_store_hook(const std::string& fn, const std::string& coord, bool key) {
        w_.open("__device__ static void " + fn + "(const Params& p, const Head& hd, int n, int " + coord + ", float v)");
        for (size_t n = 0; n < plan_.grad_sites.size(); ++n) {
            const InputGradSite& g = plan_.grad_sites[n];
            if (!(key ? g.per_key : g.per_query)) continue;
            const InputGradOutput& o = output(g);
            const std::string f = "p." + grad_field(o.name), pre = "g" + std::to_string(n) + "_";
            w_.line("// tensor '" + o.name + "' at " + dsl_text(g.read));
            w_.open("if (n == " + std::to_string(g.row_site) + ")");
            const std::string ok = site_indices(g, pre);
            w_.line("if (!(" + ok + ")) return;");
            store_element(g, pre, "v");
            w_.line("return;");
            w_.close();
        }
        w_.close();
        w_.line();
    }

    // backward_dkdv's per-key sites (common/input_grads.cuh): the contributions, the store
    // of a key's sum per (b, query head), and the last CTA's plane sums.
    void key_grad_hooks() {
        w_.line("// Per-key gradients of captured tensors (codegen/input_grads.h, common/input_grads.cuh): each");
        w_.line("// read site n adds dt * d t / d read to the thread's sum of its key row (acc.row_add).");
        w_.line("template <class Acc>");
        w_.open("__device__ static void input_grads_key(const Params& p, const Head& hd, const Row& r, float s, int q, "
                "int k, float dt, Acc& acc)");
        bindings(plan_.grad_bindings, "", true);
        for (const auto& g : plan_.grad_sites) {
            if (!g.per_key) continue;
            w_.line("// tensor '" + output(g).name + "' at " + dsl_text(g.read) + ": d t / d read = " +
                    dsl_text(g.partial));
            w_.line("if (dt != 0.f) acc.row_add(" + std::to_string(g.row_site) + ", dt * (" +
                    emit_expr(g.partial, names_) + "));");
        }
        w_.close();
        w_.line();
        w_.line("// The sum of key k's column for this (b, h) of per-key site n.");
        row_store_hook("input_grads_key_store", "k", true);
        w_.line("// The last backward_dkdv CTA: the plane-order sums of the per-key gradients with planes.");
        w_.open("__device__ static void finish_key_grad_planes(const Params& p, long long first, long long step)");
        for (const auto& o : plan_.grad_outputs)
            if (o.per_key) plane_sum(o, true);
        w_.close();
        w_.line();
    }

    std::string site_offset(const InputGradSite& g, const std::string& prefix) const {
        const auto* load = g.read.as<dsl::TensorLoad>();
        const std::string f = "p." + grad_field(output(g).name);
        std::string off;
        for (size_t d = 0; d < load->indices.size(); ++d)
            off += (d ? " + " : "") + prefix + std::to_string(d) + " * " + f + ".stride[" + std::to_string(d) + "]";
        return off.empty() ? "0" : off;
    }

    void input_grad_hooks() {
        const auto& sites = plan_.grad_sites;
        w_.line("// Gradients of captured tensors and scalars (codegen/input_grads.h, common/input_grads.cuh):");
        w_.line("// dt = dL/dt of element (q, k); each read site adds dt * d t / d read to the element it reads.");
        w_.line("template <class Acc>");
        w_.open("__device__ static void input_grads(const Params& p, const Head& hd, const Row& r, float s, int q, int k, "
                "float dt, Acc& acc)");
        bindings(plan_.grad_bindings, "", true);
        for (size_t n = 0; n < sites.size(); ++n) {
            const InputGradSite& g = sites[n];
            const InputGradOutput& o = output(g);
            w_.line("// " + std::string(o.scalar ? "scalar '" : "tensor '") + o.name + "'" +
                    (g.read.defined() ? " at " + dsl_text(g.read) : std::string()) + ": d t / d read = " +
                    dsl_text(g.partial));
            if (g.store) {
                const std::string pre = "g" + std::to_string(n) + "_";
                const std::string ok = site_indices(g, pre);
                const std::string f = "p." + grad_field(o.name);
                w_.open("if (" + ok + ")");
                w_.line("const float c = dt == 0.f ? 0.f : dt * (" + emit_expr(g.partial, names_) + ");");
                store_element(g, pre, "c");
                w_.close();
            } else if (g.per_query) {
                // The thread's sum of its query row (the slot the caller set).
                w_.line("if (dt != 0.f) acc.row_add(" + std::to_string(g.row_site) + ", dt * (" +
                        emit_expr(g.partial, names_) + "));");
            } else if (g.table) {
                // The thread's own row of table elements (common/input_grads.cuh).
                const std::string pre = "g" + std::to_string(n) + "_";
                const std::string ok = site_indices(g, pre);
                const std::string f = "p." + grad_field(o.name), dd = std::to_string(g.table_dim);
                w_.line("if (dt != 0.f && " + ok + ")");
                w_.line("    acc.table_add(" + f + ".stride[" + dd + "] == 0 ? 0 : " + pre + dd + ", dt * (" +
                        emit_expr(g.partial, names_) + "));");
            } else {
                w_.line("if (dt != 0.f) acc.v[" + std::to_string(g.accum) + "] += dt * (" +
                        emit_expr(g.partial, names_) + ");");
            }
        }
        w_.close();
        w_.line();

        if (plan_.grad_stores()) {
            w_.line("// 0 into the stored elements of (q, k): the CTA's rows, before its main loop.");
            w_.open("__device__ static void input_grads_zero(const Params& p, const Head& hd, int q, int k)");
            for (size_t n = 0; n < sites.size(); ++n) {
                const InputGradSite& g = sites[n];
                if (!g.store) continue;
                const InputGradOutput& o = output(g);
                const std::string pre = "g" + std::to_string(n) + "_";
                const std::string ok = site_indices(g, pre);
                const std::string f = "p." + grad_field(o.name);
                w_.line("if (" + f + ".planes == nullptr && " + ok + ")  // planes: zeroed by the host");
                w_.line("    " + direct_store(g, pre, "0.f"));
            }
            w_.close();
            w_.line();
        }

        if (plan_.grad_batch_sum()) {
            const InputGradSite& g = sites[0];
            w_.line("// The batch-sum launch (sm80/backward_dq.cuh run_batch_sum): the one site's contribution at");
            w_.line("// (q, k), 0 outside the tensor; and the element of (q, k), summed over the batch, stored.");
            w_.open("__device__ static float input_grad_batch_value(const Params& p, const Head& hd, const Row& r, float s, "
                    "int q, int k, float dt)");
            bindings(plan_.grad_bindings, "", true);
            const std::string in_value = site_indices(g, "g0_");
            w_.line("return dt != 0.f && " + in_value + " ? dt * (" + emit_expr(g.partial, names_) + ") : 0.f;");
            w_.close();
            w_.open("__device__ static void input_grads_batch_store(const Params& p, const Head& hd, int q, int k, float v)");
            const std::string in_store = site_indices(g, "g0_");
            w_.line("if (" + in_store + ")");
            w_.line("    " + direct_store(g, "g0_", "v"));
            w_.close();
            w_.line();
        }

        if (plan_.grad_query_sites() > 0) {
            w_.line("// The sum of query row q for this (b, h) of per-query site n.");
            row_store_hook("input_grads_query_store", "q", false);
        }

        if (plan_.grad_accum_outputs() == 0) return;
        w_.line("// The dense index of summed site n's element for this CTA's (b, h); -1 outside the tensor.");
        w_.open("__device__ static long long grad_site_index(const Params& p, const Head& hd, int n)");
        for (const auto& g : sites) {
            if (g.accum < 0) continue;
            w_.open("if (n == " + std::to_string(g.accum) + ")");
            if (!g.read.defined()) {
                w_.line("return 0;  // a runtime scalar");
            } else {
                const std::string ok = site_indices(g, "i");
                w_.line("if (!(" + ok + ")) return -1;");
                w_.line("return " + dense_index(g, "i") + ";");
            }
            w_.close();
        }
        w_.line("return -1;");
        w_.close();
        w_.line();

        w_.open("__device__ static int grad_site_output(int n)");
        for (const auto& g : sites)
            if (g.accum >= 0)
                w_.line("if (n == " + std::to_string(g.accum) + ") return " + std::to_string(g.output) + ";");
        w_.line("return -1;");
        w_.close();
        w_.line();

        for (const auto& g : sites) {
            if (!g.table) continue;
            const auto* load = g.read.as<dsl::TensorLoad>();
            const std::string f = "p." + grad_field(output(g).name), dd = std::to_string(g.table_dim);
            w_.line("// The table site's table elements per (b, h): its index " + dd + " (one when broadcast).");
            w_.open("__device__ static long long grad_table_len(const Params& p)");
            w_.line("return " + f + ".stride[" + dd + "] == 0 ? 1 : " + f + ".shape[" + dd + "];");
            w_.close();
            w_.line();
            w_.line("// The dense distance of consecutive table elements (1 when broadcast: one element).");
            w_.open("__device__ static long long grad_table_step(const Params& p)");
            std::string step = "1";
            for (size_t d = static_cast<size_t>(g.table_dim) + 1; d < load->indices.size(); ++d)
                step += " * (" + f + ".stride[" + std::to_string(d) + "] == 0 ? 1 : " + f + ".shape[" +
                        std::to_string(d) + "])";
            w_.line("return " + step + ";");
            w_.close();
            w_.line();
            w_.line("// The dense index of the table site's element x (< grad_table_len) for this CTA's (b, h);");
            w_.line("// -1 outside the tensor.");
            w_.open("__device__ static long long grad_table_dense(const Params& p, const Head& hd, long long x)");
            std::string in_bounds;
            for (size_t d = 0; d < load->indices.size(); ++d) {
                const std::string i = "i" + std::to_string(d), ds = std::to_string(d);
                if (static_cast<int>(d) == g.table_dim) {
                    w_.line("const long long " + i + " = x;");
                    continue;
                }
                w_.line("const long long " + i + " = " + emit_expr(load->indices[d], names_) + ";");
                in_bounds += std::string(in_bounds.empty() ? "" : " && ") + "(" + f + ".stride[" + ds + "] == 0 || (" +
                             i + " >= 0 && " + i + " < " + f + ".shape[" + ds + "]))";
            }
            if (!in_bounds.empty()) w_.line("if (!(" + in_bounds + ")) return -1;");
            w_.line("return " + dense_index(g, "i") + ";");
            w_.close();
            w_.line();
        }

        // Elements of output o (stride-0 dimensions count once), and the store of one.
        w_.open("__device__ static long long grad_output_size(const Params& p, int o)");
        for (int o = 0; o < plan_.grad_accum_outputs(); ++o) {
            const InputGradOutput& out = plan_.grad_outputs[static_cast<size_t>(o)];
            const std::string f = "p." + grad_field(out.name);
            std::string size = "1";
            for (int d = 0; d < (out.scalar ? 0 : out.rank); ++d)
                size += " * (" + f + ".stride[" + std::to_string(d) + "] == 0 ? 1 : " + f + ".shape[" +
                        std::to_string(d) + "])";
            w_.line("if (o == " + std::to_string(o) + ") return " + size + ";  // '" + out.name + "'");
        }
        w_.line("return 0;");
        w_.close();
        w_.line();

        w_.open("__device__ static void grad_output_store(const Params& p, int o, long long dense, float v)");
        for (int o = 0; o < plan_.grad_accum_outputs(); ++o) {
            const InputGradOutput& out = plan_.grad_outputs[static_cast<size_t>(o)];
            const std::string f = "p." + grad_field(out.name);
            w_.open("if (o == " + std::to_string(o) + ")");
            w_.line("long long off = 0;");
            for (int d = (out.scalar ? 0 : out.rank) - 1; d >= 0; --d) {
                const std::string ds = std::to_string(d);
                w_.open("if (" + f + ".stride[" + ds + "] != 0)");
                w_.line("off += dense % " + f + ".shape[" + ds + "] * " + f + ".stride[" + ds + "];");
                w_.line("dense /= " + f + ".shape[" + ds + "];");
                w_.close();
            }
            w_.line(f + ".ptr[off] = attnjit::FromFloat<" + std::string(cuda_elem_type(out.scalar ? DType::f32 : out.dtype)) +
                    ">::cvt(v);");
            w_.line("return;");
            w_.close();
        }
        w_.close();
        w_.line();
    }

    SourceWriter& w_;
    const KernelPlan& plan_;
    Bindings all_;
    EmitNames names_;
};

}  // namespace

void emit_variant(SourceWriter& w, const KernelPlan& plan) { VariantEmitter(w, plan).run(); }

}  // namespace attnjit::codegen
