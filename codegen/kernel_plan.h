// KernelPlan: what lower() made of an AttentionSpec. Tile-independent; generate() turns
// it into CUDA text. Every expression here is simplified, common subexpressions are
// bindings, and loop invariants sit at the level where they are computed.
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "codegen/bias_tile.h"
#include "codegen/binding.h"
#include "codegen/grad_reduction.h"
#include "codegen/mask_analysis.h"
#include "codegen/spec_inputs.h"
#include "dsl/attention_spec.h"

namespace attnjit::codegen {

// A gradient output of a backward_dq plan: a captured tensor or runtime scalar whose
// gradient was asked for (lower(spec, inputs, kind, grads)).
struct InputGradOutput {
    std::string name;
    bool scalar = false;        // a runtime scalar: one f32 element
    DType dtype = DType::f32;   // the tensor's dtype (the gradient's)
    int rank = 0;
    bool stored = false;        // written by an elementwise, per-query or per-key site (direct or through planes)
    bool per_key = false;       // written by a per-key site in backward_dkdv: its planes are summed by the
                                // last backward_dkdv CTA, not at backward_dkdv's start
};

// One read site of a wanted input in score_mod, with how its contributions are summed.
struct InputGradSite {
    int output = 0;             // index into KernelPlan::grad_outputs
    dsl::Expr read;             // the TensorLoad (undefined for a scalar)
    GradReductionPlan reduction;
    bool store = false;         // elementwise: each element stored once; else summed per CTA
    int accum = -1;             // the per-CTA sum slot (not store, not table)
    // A table read (GradReduction::Diagonal or Gather): its index table_dim is the one that
    // varies over the score matrix (reads q_idx, kv_idx or a tensor: clamp(j - i, -m, m) + m,
    // doc[j]); the others read b, h, kv_head or nothing. Summed per thread, per element of
    // that index, then per CTA, then across CTAs in CTA order.
    bool table = false;
    int table_dim = -1;
    // A per-query read (GradReduction::PerQuery, q_bias[b][h][q_idx]): summed over the keys
    // of each query row by the backward_dq CTA that owns the row, then stored once per
    // (b, h, row) like an elementwise site (direct or planes). A per-key read (PerKey,
    // kv_bias[h][kv_idx]): likewise over the queries of each key, in backward_dkdv, once per
    // (b, query head, key). row_site: its index among the plan's sites of its kind.
    bool per_query = false;
    bool per_key = false;
    int row_site = -1;
    dsl::Expr partial;          // d t / d read, CSE'd and hoisted with score_mod
    // Per index of the read (store, per-query and per-key sites): what it is, and whether it is the bare
    // coordinate (b, not b + 1): decides at launch whether stores go direct or to planes.
    enum class Role { Const, Batch, Head, KvHead, Q, K, Other };
    std::vector<Role> roles;
    std::vector<bool> bare;
};

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
    // backward_dq plans that were asked for gradients of captured tensors or scalars:
    // the outputs (by name) and every read site (common/input_grads.cuh); empty otherwise.
    std::vector<InputGradOutput> grad_outputs;
    std::vector<InputGradSite> grad_sites;
    Bindings grad_bindings;  // per-element temporaries the partials read
    // backward_dkdv plans asked for gradients with stored sites: the outputs, and it sums
    // their planes (grad_outputs set); grad_sites holds the per-key sites it computes
    // itself (empty when there are none).
    bool grad_planes = false;
    ClassifyCode classify;  // the body of Variant::classify; can_classify: it may return kSkip / kFull

    // The spec's declared inputs (the Params struct carries every one, see
    // params_layout.h; the lowered expressions may read fewer) and its captured-tensor
    // reads as a program over launch numbers, which runtime evaluates before every launch.
    SpecInputs inputs;

    bool has_score_mod() const { return score_mod.defined(); }
    bool has_mask() const { return mask.defined(); }
    bool has_score_grad() const { return d_score.defined(); }
    bool has_input_grads() const { return !grad_outputs.empty() && !grad_planes; }  // backward_dq's hooks
    int grad_accums() const;      // sites summed per CTA (uniform)
    int grad_table_output() const; // the output of the table site, -1: none
    int grad_accum_outputs() const;  // the outputs those write (they come first in grad_outputs)
    bool grad_stores() const;     // some site is stored elementwise
    // The only site is stored elementwise: backward_dq can also sum its gradient over the
    // batch in a launch of its own (sm80/backward_dq.cuh run_batch_sum) instead of planes.
    bool grad_batch_sum() const;
    int grad_query_sites() const; // per-query sites (backward_dq)
    int grad_key_sites() const;   // per-key sites (backward_dkdv)
    // Whether the kernel's Params carry a GradWork: backward_dq's per-CTA sums, or
    // backward_dkdv's ticket for its per-key sums. The one rule for the generated Params
    // and the host's packing.
    bool needs_grad_work() const { return grad_accum_outputs() > 0 || grad_key_sites() > 0; }
    // Forward plans of a gated spec (spec.gate()): the Variant gets kHasOutputTransform and
    // transform_output(p, hd, row, o, q, d) = o * sigmoid(gate[b][h][q][d]).
    bool output_gate = false;
    // A score convolution (spec.score_conv(); forward and backward plans): mask is the causal mask
    // it implies (and the spec's mask with it); the Variant gets kScoreConvRows /
    // kScoreConvCols and score_conv_weight.
    bool score_conv = false;
    // The spec's own mask with a score convolution (every kind's plan): the convolution
    // keeps its taps inside it (docs/score_convolution.md), so the Variant also gets
    // kScoreConvMask, score_conv_mask(p, hd, row, q, k) (the mask without the causal part)
    // and score_conv_mask_classify.
    dsl::Expr conv_mask;
    Bindings conv_mask_bindings;  // per-element temporaries computed in conv_mask
    ClassifyCode conv_mask_classify;  // of conv_mask alone: the body of score_conv_mask_classify
    // Forward and backward_dq plans whose score_mod reads a bias tile (codegen/bias_tile.h):
    // the Variant gets kHasBiasTile, bias_tile(p, hd) (and kBiasTileBatchInvariant when no
    // leading index reads b), and score_mod takes the bias as an argument.
    std::optional<BiasTile> bias_tile;
    // A reciprocal band (spec.reciprocal_band(); forward, backward_dq and backward_dkdv plans;
    // the others have none): mask (every plan) holds the causal mask of
    // its causal form; the Variant gets kRecipBandWidth, kRecipBandCausal and
    // recip_band_alpha(p, h).
    bool reciprocal_band = false;
    // A latent projection (spec.latent(); forward plans): the Variant gets kLatentDim and
    // latent_weights(p, h), the projections of query head h (sm80/latent.cuh).
    bool latent = false;
    // Attention sinks (spec.sinks()): the Variant gets kHasSink and sink(p, h).
    bool has_sinks() const { return spec.has_sinks(); }
    // head, row, then the element bindings of score_mod and of mask (each name once).
    Bindings all_bindings() const;
};

std::ostream& operator<<(std::ostream& os, const KernelPlan& plan);

}  // namespace attnjit::codegen
