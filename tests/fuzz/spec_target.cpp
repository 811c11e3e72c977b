#include "spec_target.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <typeinfo>

#include "attnjit/attnjit_c.h"
#include "codegen/classify_box.h"
#include "codegen/generate.h"
#include "codegen/kernel_plan.h"
#include "codegen/lower.h"
#include "codegen/kernel_config.h"
#include "codegen/params_layout.h"
#include "dsl/spec_json.h"
#include "support/error.h"

namespace attnjit::fuzz {
namespace {

void (*stage_observer)(const char*) = nullptr;

void enter(const char* stage) {
    if (stage_observer) stage_observer(stage);
}

// Messages can be long (NVRTC logs quote the source); a log wants the start of them.
std::string shorten(std::string s, size_t max = 6000) {
    if (s.size() > max) s = s.substr(0, max) + "\n... [" + std::to_string(s.size() - max) + " more bytes]";
    return s;
}

void report(Outcome& out, const char* stage, std::string kind, std::string message) {
    if (!out.finding) out.finding = Finding{stage, std::move(kind), shorten(std::move(message))};
}

// Runs one stage of the pipeline. Returns true when it finished; a UserError is an
// acceptable answer (recorded, false) unless the spec was already accepted as valid by
// a stage that promises it (`user_error_is_finding`); anything else thrown is a finding.
template <class Body>
bool stage(Outcome& out, const char* name, Body&& body, bool user_error_is_finding = false) {
    enter(name);
    try {
        body();
        return true;
    } catch (const UserError& e) {
        if (user_error_is_finding) report(out, name, "a spec spec_from_json accepted is refused", e.what());
        else if (out.rejection.empty()) out.rejection = std::string(name) + ": " + e.what();
    } catch (const InternalError& e) {
        report(out, name, "internal error", e.what());
    } catch (const EnvironmentError& e) {
        // These stages are pure C++: nothing in them may need the environment.
        report(out, name, "environment error in a pure stage", e.what());
    } catch (const std::exception& e) {
        report(out, name, std::string("unexpected exception ") + typeid(e).name(), e.what());
    } catch (...) {
        report(out, name, "exception of unknown type", "");
    }
    return false;
}

// The C++ reader's answer must be a spec or a SpecParseError located in the document.
std::optional<dsl::AttentionSpec> read_spec(Outcome& out, std::string_view doc) {
    enter("json->spec");
    try {
        return dsl::spec_from_json(doc, "spec");
    } catch (const dsl::SpecParseError& e) {
        out.rejection = std::string("json->spec: ") + e.what();
        const long lines = 1 + std::count(doc.begin(), doc.end(), '\n');
        if (e.line() < 1 || e.line() > lines || e.column() < 1)
            report(out, "json->spec", "error located outside the document",
                   "line " + std::to_string(e.line()) + " column " + std::to_string(e.column()) + " of a " +
                       std::to_string(lines) + "-line document: " + e.what());
    } catch (const UserError& e) {
        // docs/spec_format.md: every problem of a document is a located SpecParseError.
        report(out, "json->spec", "user error without a location (not a SpecParseError)", e.what());
    } catch (...) {
        stage(out, "json->spec", [] { throw; });
    }
    return std::nullopt;
}

attnjit_status expected_c_status(const Outcome& out) {
    if (out.valid) return ATTNJIT_OK;
    return out.rejection.rfind("json->spec: ", 0) == 0 ? ATTNJIT_ERROR_PARSE : ATTNJIT_ERROR_INVALID_ARGUMENT;
}

struct SpecHandle {
    attnjit_spec* p = nullptr;
    ~SpecHandle() { attnjit_spec_destroy(p); }
};
struct KernelHandle {
    attnjit_kernel* p = nullptr;
    ~KernelHandle() { attnjit_kernel_destroy(p); }
};

std::string c_error(attnjit_status s) {
    return std::string(attnjit_status_name(s)) + ": " + attnjit_last_error();
}

// The C API reads the document as the C++ reader did and answers the queries the same.
void check_c_spec(Outcome& out, std::string_view doc, const dsl::AttentionSpec* spec, attnjit_spec** keep) {
    const char* stage_name = "C API spec";
    enter(stage_name);
    SpecHandle h;
    const attnjit_status s = attnjit_spec_from_json(doc.data(), doc.size(), &h.p);
    if (s == ATTNJIT_ERROR_INTERNAL) return report(out, stage_name, "ATTNJIT_ERROR_INTERNAL", c_error(s));
    if (s != expected_c_status(out))
        return report(out, stage_name, "verdict differs from C++",
                      "attnjit_spec_from_json gave " + c_error(s) + "\nC++ gave: " +
                          (out.valid ? std::string("a valid spec") : out.rejection));
    if (!spec) return;
    char* json = nullptr;
    const attnjit_status js = attnjit_spec_to_json(h.p, &json);
    if (js != ATTNJIT_OK) return report(out, stage_name, "attnjit_spec_to_json failed", c_error(js));
    const std::string c_json(json);
    attnjit_free_string(json);
    const std::string cpp_json = dsl::spec_to_json(*spec);
    if (c_json != cpp_json)
        return report(out, stage_name, "mismatch", "attnjit_spec_to_json:\n" + c_json + "\nspec_to_json:\n" + cpp_json);
    uint64_t hash = 0;
    if (attnjit_spec_hash(h.p, &hash) != ATTNJIT_OK || hash != spec->hash())
        return report(out, stage_name, "mismatch", "attnjit_spec_hash differs from AttentionSpec::hash");
    if (attnjit_spec_returns_lse(h.p) != (spec->returns_lse() ? 1 : 0))
        return report(out, stage_name, "mismatch", "attnjit_spec_returns_lse");
    const auto tensors = spec->tensors();
    const auto scalars = spec->scalars();
    if (attnjit_spec_num_tensors(h.p) != static_cast<int32_t>(tensors.size()) ||
        attnjit_spec_num_scalars(h.p) != static_cast<int32_t>(scalars.size()))
        return report(out, stage_name, "mismatch", "attnjit_spec_num_tensors/num_scalars differ from the spec's inputs");
    int32_t i = 0;
    for (const auto& [name, info] : tensors) {  // std::map: sorted by name, the C order
        const char* n = nullptr;
        int32_t dtype = -1, rank = -1;
        if (attnjit_spec_tensor(h.p, i++, &n, &dtype, &rank) != ATTNJIT_OK || !n || name != n || rank != info.rank)
            return report(out, stage_name, "mismatch", "attnjit_spec_tensor(" + std::to_string(i - 1) + ") is not " + name);
    }
    i = 0;
    for (const auto& [name, type] : scalars) {
        const char* n = nullptr;
        int32_t is_int = -1;
        if (attnjit_spec_scalar(h.p, i++, &n, &is_int) != ATTNJIT_OK || !n || name != n ||
            is_int != (type == dsl::Type::Int ? 1 : 0))
            return report(out, stage_name, "mismatch", "attnjit_spec_scalar(" + std::to_string(i - 1) + ") is not " + name);
    }
    // One past the end is the caller's mistake, never a crash.
    const char* n = nullptr;
    int32_t a = 0, b = 0;
    const attnjit_status past = attnjit_spec_tensor(h.p, i = static_cast<int32_t>(tensors.size()), &n, &a, &b);
    if (past != ATTNJIT_ERROR_INVALID_ARGUMENT)
        return report(out, stage_name, "wrong status", "attnjit_spec_tensor(count) gave " + c_error(past));
    *keep = h.p;
    h.p = nullptr;
}

// NVRTC, through the C API as a binding would: the code of a valid spec must compile.
void check_c_compile(Outcome& out, attnjit_spec* spec, const std::string& cpp_source) {
    const char* stage_name = "C API compile (NVRTC, sm_90a)";
    enter(stage_name);
    attnjit_compile_options o = ATTNJIT_COMPILE_OPTIONS_INIT;
    o.arch = "sm_90a";
    KernelHandle k;
    const attnjit_status s = attnjit_compile(spec, &o, &k.p);
    switch (s) {
    case ATTNJIT_OK: break;
    case ATTNJIT_ERROR_ENVIRONMENT: {
        // No NVRTC here: nothing to check, and nothing wrong with the spec.
        static bool said = false;
        if (!said) std::fprintf(stderr, "[fuzz] NVRTC stage skipped: %s\n", attnjit_last_error());
        said = true;
        return;
    }
    case ATTNJIT_ERROR_INTERNAL:
        return report(out, stage_name, "NVRTC rejected a valid spec (ATTNJIT_ERROR_INTERNAL)", c_error(s));
    default:
        if (out.rejection.empty()) out.rejection = std::string(stage_name) + ": " + c_error(s);
        return;
    }
    out.compiled = true;
    const char* src = attnjit_kernel_source(k.p);
    if (!src || cpp_source != src)
        return report(out, stage_name, "mismatch", "attnjit_kernel_source differs from codegen::generate");
    const char* arch = attnjit_kernel_arch(k.p);
    if (!arch || std::string(arch) != "sm_90a") return report(out, stage_name, "mismatch", "attnjit_kernel_arch");
}

// The plan's tile classification (the interval rules of interval_rules.h) run on the
// host over a few boxes, with every input given a value: the device runs the same rules,
// so arithmetic the host twin gets wrong (overflow, division) the kernel gets wrong too.
// Tensors broadcast one element (all strides 0): any index a mask computes is in bounds.
void classify_some_boxes(const dsl::AttentionSpec& spec, const codegen::KernelPlan& plan) {
    codegen::HostEnv env;
    env.b = 1;
    env.h = 3;
    env.kv_head = 1;
    env.q_len = 64;
    env.kv_len = 96;
    for (const auto& [name, type] : spec.scalars()) env.scalars[name] = type == dsl::Type::Int ? 3.0 : 1.5;
    for (const auto& [name, info] : spec.tensors()) {
        const double value = info.dtype == DType::u8 ? 1.0 : dtype_is_float(info.dtype) ? 0.25 : 7.0;
        env.tensors[name] = codegen::HostTensor{{value}, std::vector<long long>(static_cast<size_t>(info.rank), 0)};
    }
    for (const codegen::Box& box : {codegen::Box{0, 15, 0, 15}, codegen::Box{16, 47, 0, 31},
                                    codegen::Box{0, 63, 64, 95}, codegen::Box{0, 63, 0, 95}})
        codegen::classify_box(plan, box, env);
}

}  // namespace

void set_stage_observer(void (*observer)(const char* stage)) { stage_observer = observer; }

void prepare_environment() { setenv("ATTNJIT_DISABLE_DISK_CACHE", "1", /*overwrite=*/0); }

Outcome check_document(std::string_view doc, const std::function<bool()>& compile_this_one) {
    Outcome out;
    const std::optional<dsl::AttentionSpec> spec = read_spec(out, doc);
    out.valid = spec.has_value();
    attnjit_spec* c_spec = nullptr;
    if (!out.finding) check_c_spec(out, doc, spec ? &*spec : nullptr, &c_spec);
    SpecHandle own_c_spec{c_spec};
    if (!spec || out.finding) return out;

    // A spec the reader accepted is valid, prints, and reads back as itself.
    std::string json;
    if (!stage(out, "validate", [&] {
            if (auto why = spec->why_invalid()) user_error << *why;
            spec->validate();
        }, true))
        return out;
    std::optional<dsl::AttentionSpec> again;
    if (!stage(out, "spec->json", [&] { json = dsl::spec_to_json(*spec); }, true)) return out;
    if (!stage(out, "round trip", [&] { again = dsl::spec_from_json(json, "printed"); })) {
        if (!out.finding) report(out, "round trip", "the printed spec does not read back", out.rejection + "\n" + json);
        return out;
    }
    if (!(*again == *spec) || again->hash() != spec->hash() || dsl::spec_to_json(*again) != json) {
        report(out, "round trip", "mismatch", "spec_from_json(spec_to_json(s)) differs from s:\n" + json);
        return out;
    }

    // Planning, the mask analysis and code generation; equal specs give the same bytes.
    std::string source, again_source;
    std::optional<codegen::KernelPlan> plan;
    const bool generated = stage(out, "lower", [&] {
        plan = codegen::lower(*spec);
        std::ostringstream text;
        text << *plan << codegen::params_layout(*spec, KernelKind::forward);
    }) && stage(out, "mask analysis (host twin)", [&] { classify_some_boxes(*spec, *plan); }) &&
                           stage(out, "generate", [&] {
        // The target the C API stage compiles for (its source names it).
        const std::string arch = "sm_90a";
        source = codegen::generate(*spec, codegen::make_config(*spec, KernelKind::forward, arch), arch).source;
        again_source = codegen::generate(*again, codegen::make_config(*again, KernelKind::forward, arch), arch).source;
    });
    if (generated && again_source != source) {
        report(out, "generate", "mismatch", "two equal specs (the document's and its round trip) generated different sources");
        return out;
    }
    if (!generated || !compile_this_one()) return out;
    check_c_compile(out, c_spec, source);
    return out;
}

namespace {

// The document as printable text: \xNN for bytes a terminal would mangle.
std::string printable(std::string_view s) {
    std::string r;
    for (unsigned char c : s) {
        if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) {
            r += static_cast<char>(c);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            r += buf;
        }
    }
    return r;
}

}  // namespace

std::string describe(const Finding& f, std::string_view doc, size_t max_doc_chars) {
    std::ostringstream s;
    s << "FINDING stage: " << f.stage << "\n        kind:  " << f.kind << "\n        message:\n"
      << f.message << "\n        document (" << doc.size() << " bytes; non-printable bytes as \\xNN):\n";
    if (doc.size() <= max_doc_chars) {
        s << printable(doc);
    } else {
        s << printable(doc.substr(0, max_doc_chars / 2)) << "\n... [" << doc.size() - max_doc_chars * 3 / 4
          << " bytes omitted] ...\n"
          << printable(doc.substr(doc.size() - max_doc_chars / 4));
    }
    s << "\n";
    return s.str();
}

}  // namespace attnjit::fuzz
