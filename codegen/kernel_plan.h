// KernelPlan: what lower() made of an AttentionSpec. Tile-independent; generate() turns
// it into CUDA text. Every expression here is simplified, common subexpressions are
// bindings, and loop invariants sit at the level where they are computed.
#pragma once

#include <map>
#include <ostream>
#include <string>

#include "codegen/binding.h"
#include "codegen/mask_analysis.h"
#include "codegen/spec_inputs.h"
#include "dsl/attention_spec.h"

namespace attnjit::codegen {

struct KernelPlan {
    dsl::AttentionSpec spec;  // what was asked for, unchanged (dtype and head dims included)

    Bindings head;            // Variant::Head fields (make_head), evaluation order
    Bindings row;             // Variant::Row fields (make_row)
    Bindings score_bindings;  // per-element temporaries computed in score_mod
    Bindings mask_bindings;   // per-element temporaries computed in mask

    dsl::Expr score_mod;  // undefined: the identity (no score_mod hook work)
    dsl::Expr mask;       // undefined: keep every in-bounds key

    // Plans for backward kernels (lower(spec, inputs, kind) with a backward kind) also hold
    // d score_mod / d s (codegen/autodiff.h), hoisted with score_mod; undefined: 1.
    bool gradients = false;
    dsl::Expr d_score;
    Bindings d_score_bindings;  // per-element temporaries computed in d_score
    ClassifyCode classify;  // the body of Variant::classify; can_classify: it may return kSkip / kFull

    // The spec's declared inputs (the Params struct carries every one, see
    // params_layout.h; the lowered expressions may read fewer) and its captured-tensor
    // reads as a program over launch numbers, which runtime evaluates before every launch.
    SpecInputs inputs;

    bool has_score_mod() const { return score_mod.defined(); }
    bool has_mask() const { return mask.defined(); }
    bool has_score_grad() const { return d_score.defined(); }
    // Attention sinks (spec.sinks()): the Variant gets kHasSink and sink(p, h).
    bool has_sinks() const { return spec.has_sinks(); }
    // head, row, then the element bindings of score_mod and of mask (each name once).
    Bindings all_bindings() const;
};

std::ostream& operator<<(std::ostream& os, const KernelPlan& plan);

}  // namespace attnjit::codegen
