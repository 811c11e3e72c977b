// mask_analysis: tile classification by interval arithmetic (interval_rules.h).
//
// Emits the body of Variant::classify(p, hd, q0, q1, k0, k1, ctx): a straight-line
// computation of an interval for every int subexpression of the mask and of "may be
// true" / "may be false" for every bool one over the box [q0, q1] x [k0, k1], ending in
// kSkip (no element kept), kFull (every element kept) or kPartial; only the locals that
// the return logic reads are emitted (the rules compute both bounds of everything; a
// bound no decision needs is dropped, so nothing is declared and never read), each under
// the DSL text of the subexpression it belongs to. Document masks get
// their ranges from the template's block-collective ctx.int_range(ptr, stride, first,
// last) (templates/attnjit/common/intervals.cuh), which every thread calls alike.
//
// can_classify is false when the analysis learns nothing at codegen time (both "may
// be true" and "may be false" are the constant true): the kernel then treats every tile
// as partial and never calls classify.
#pragma once

#include <string>
#include <vector>

#include "codegen/binding.h"

namespace attnjit::codegen {

// Stored in KernelPlan::classify by lower(); generate() emits `lines` as is.
struct ClassifyCode {
    bool can_classify = false;
    // The body reads captured tensors (ctx.int_range / ctx.float_range): worth classifying
    // many tiles at once rather than one load round trip per tile.
    bool reads_memory = false;
    std::vector<std::string> lines;  // statements of the body, comments included
};

// `mask` reads `bindings` (all levels) through Temps; head-level ones are read from the
// Head struct ("hd.<name>"). An undefined mask keeps everything: kFull.
ClassifyCode mask_analysis(const dsl::Expr& mask, const Bindings& bindings);

}  // namespace attnjit::codegen
