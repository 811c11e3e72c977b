// Gradients of captured tensors and runtime scalars (issue 8 item 4): the Params fields a
// backward_dq kernel gets when its spec asks for them (codegen/params_layout.h), and the
// workspace of their cross-CTA sums. Plain C++ with no includes: the host and NVRTC
// compile this same header.
//
// An element of a gradient is a memory location of its view: the view has the captured
// tensor's shape, and stride 0 exactly where the captured tensor has stride 0 in a
// dimension of size > 1 (a broadcast: every index of that dimension is the one element,
// so their contributions add). An element's dense index numbers the view's elements in
// row-major order with those dimensions counted as size 1.
#pragma once

namespace attnjit {

// One gradient output. T: the captured tensor's element type (float for a runtime
// scalar, R = 0: one f32 element).
//
// Elementwise sites, and the row sums of per-query and per-key sites (common/input_grads.cuh),
// either store into ptr directly (planes null: every element is written once) or, where
// elements receive sums
// (a broadcast bias [1, H, N, N], a read without the batch or head index, a tensor larger
// than the score matrix), store fp32 into one plane per summed (batch, head) coordinate:
// plane (plane_b ? b : 0) * (plane_h ? Hq : 1) + (plane_h ? h : 0), element = dense
// index; the host zeroes the planes, and backward_dkdv (which runs after backward_dq)
// sums them in plane order and stores every element of the gradient; the planes of
// per-key sites, which backward_dkdv writes itself, are summed by its last CTA (the
// GradWork ticket). A Variant with kInputGradBatchSum may have its one site summed over
// the batch by backward_dq's batch-sum launch instead (BackwardArgs::batch_sum).
template <class T, int R>
struct GradArg {
    T* ptr;
    float* planes;          // null: direct stores
    long long plane_elems;  // elements of one plane: the gradient's, stride-0 dimensions counted once
    int plane_b, plane_h;   // whether planes run over the batch / the query heads
    long long stride[R > 0 ? R : 1];  // elements; 0 where the captured tensor broadcasts
    long long shape[R > 0 ? R : 1];   // the captured tensor's sizes
};

// The cross-CTA sums of the sites reduced per CTA (GradReduction::Uniform): each CTA of
// backward_dq writes one partial per site (its block's fixed-order sum) and the dense
// index of the element it goes to; the CTA that finishes last (ticket) sums every
// element's partials in CTA order and stores the gradients. Deterministic: the order of
// the sum does not depend on which CTA finishes last.
//
// The one table site (one index varies: table[h][clamp(k - q, -m, m) + m], t[h][doc[k]];
// Variant::kInputGradTableOutput):
// each thread adds its elements' contributions, in its own fixed order, into its own row
// of table_len fp32 table elements (table_rows, cleared by the thread first); at its end
// the CTA sums its threads' rows per table element in thread order into table_partials
// and writes table_base (the dense index of table element 0 of its (b, h), -1 outside the
// tensor); the last CTA sums every gradient element's partials in CTA order.
struct GradWork {
    float* partials;    // [sites][ctas]
    long long* index;   // [sites][ctas], -1: the site's element is outside the tensor (contributes nothing)
    unsigned* ticket;   // one counter, zero before the launch (backward_dq's, then backward_dkdv's per-key sums)
    int ctas;           // CTAs of the backward_dq grid
    int table_threads;   // threads per CTA the rows were allocated for (the kernel's block)
    long long table_len;      // table elements per (b, h) (Variant::grad_table_len), 0: no table site
    float* table_rows;        // [ctas][table_threads][table_len]
    float* table_partials;    // [ctas][table_len]
    long long* table_base;    // [ctas]
};

}  // namespace attnjit
