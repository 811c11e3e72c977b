#include "codegen/emit_variant.h"

#include "codegen/cuda_emitter.h"
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

    bool uses_nan_min_max() const {
        for (const auto& b : all_)
            if (uses_float_min_max(b.value)) return true;
        return (plan_.has_score_mod() && uses_float_min_max(plan_.score_mod)) ||
               (plan_.has_mask() && uses_float_min_max(plan_.mask)) ||
               (plan_.has_score_grad() && uses_float_min_max(plan_.d_score));
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
        w_.line();
        if (uses_nan_min_max()) {
            w_.line("// min / max that keep NaN (the DSL's meaning; fminf / fmaxf drop it).");
            for (const char* helper : kNanMinMaxHelpers) w_.line(helper);
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

        w_.open("__device__ static float score_mod(const Params& p, const Head& hd, const Row& r, float s, int q, int k)");
        bindings(plan_.score_bindings, "", true);
        if (has_sm) {
            w_.line("// " + dsl_text(plan_.score_mod));
            w_.line("return " + emit_expr(plan_.score_mod, names_) + ";");
        } else {
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
            const std::string f = "p." + tensor_field(plan_.spec.sinks_name());
            w_.line("// Attention sink logit of query head h: " + plan_.spec.sinks_name() + "[h].");
            w_.open("__device__ static float sink(const Params& p, int h)");
            w_.line("return attnjit::to_float(" + f + ".ptr[h * " + f + ".stride[0]]);");
            w_.close();
            w_.line();
        }

        if (plan_.has_score_grad()) {
            w_.line("// d score_mod / d s (codegen/autodiff.h).");
            w_.open("__device__ static float d_score(const Params& p, const Head& hd, const Row& r, float s, int q, int k)");
            bindings(plan_.d_score_bindings, "", true);
            w_.line("// " + dsl_text(plan_.d_score));
            w_.line("return " + emit_expr(plan_.d_score, names_) + ";");
            w_.close();
            w_.line();
        }

        w_.line("// Interval analysis of the mask over q in [q0, q1], k in [k0, k1] (codegen/mask_analysis.h).");
        w_.line("template <class Ctx>");
        w_.open("__device__ static attnjit::TileClass classify(const Params& p, const Head& hd, int q0, int q1, int k0, int k1, Ctx& ctx)");
        for (const auto& l : plan_.classify.lines) w_.line(l);  // lower() ran mask_analysis
        w_.close();
        w_.close(";");
    }

private:
    SourceWriter& w_;
    const KernelPlan& plan_;
    Bindings all_;
    EmitNames names_;
};

}  // namespace

void emit_variant(SourceWriter& w, const KernelPlan& plan) { VariantEmitter(w, plan).run(); }

}  // namespace attnjit::codegen
