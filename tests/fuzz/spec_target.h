// The fuzz target of the spec front door: one document goes through everything a user's
// text reaches without a GPU, and every stage's answer is checked:
//
//   C++:   spec_from_json -> validate -> spec_to_json -> spec_from_json (same spec, hash,
//          text) -> lower (plan) -> params_layout -> generate (twice: same bytes)
//   C API: attnjit_spec_from_json (same verdict as C++) -> spec_to_json, hash, queries
//          (same answers as C++) -> on request attnjit_compile for sm_90a (NVRTC) and
//          attnjit_kernel_source (the C++ source)
//
// Oracle: a user error (a bad document) is a fine answer at any stage; an internal error,
// any other exception, an ATTNJIT_ERROR_INTERNAL status, a disagreement between stages,
// or NVRTC rejecting the code of a valid spec is a finding. Crashes, sanitizer reports and
// hangs are found by whoever runs the target (libFuzzer, or standalone_main.cpp).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace attnjit::fuzz {

struct Finding {
    std::string stage;    // "json->spec", "round trip", "generate", "C API compile", ...
    std::string kind;     // "internal error", "unexpected exception", "mismatch", ...
    std::string message;  // what happened, with the exception's message
};

struct Outcome {
    bool valid = false;         // the document is a valid spec
    bool compiled = false;      // it went through NVRTC (compile requested and possible)
    std::string rejection;      // the first user error, if a stage answered with one
    std::optional<Finding> finding;
};

// Runs one document through every stage. When the document is a valid spec whose source
// generated, `compile_this_one()` decides whether it also goes through NVRTC for sm_90a
// via the C API (about a second each, so callers sample).
Outcome check_document(std::string_view doc, const std::function<bool()>& compile_this_one);

// Called with each stage's name as it starts (the fork runner forwards it to the parent,
// so that a crash is reported with the stage it happened in).
void set_stage_observer(void (*observer)(const char* stage));

// Settings every entry point makes once before the first document: no disk cache (a
// fuzzer must not depend on, or fill, the user's cache) unless the environment says
// otherwise.
void prepare_environment();

// The finding as a block of text for a log: stage, kind, message, and the document
// (shortened beyond `max_doc_chars`, with its size), so it can be triaged from CI output.
std::string describe(const Finding& f, std::string_view doc, size_t max_doc_chars = 4000);

}  // namespace attnjit::fuzz
