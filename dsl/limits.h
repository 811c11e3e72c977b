// The documented limits on what a spec may hold (docs/spec_format.md, "Limits"). Every
// recursive walk over the IR (parser, printer, passes, emitter, interpreter, hashing,
// equality) recurses once per level of an expression, so a bounded depth is what keeps a
// hostile spec from exhausting the stack; the other limits bound code generation and
// NVRTC time. Each is checked before any code is generated, and crossing one is a
// UserError that names the limit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace attnjit::dsl {

// Levels of nested operations in one expression (a chain a + b + c + ... is as deep as
// it is long). Every stage runs the deepest expression on a 1 MiB thread stack (tested).
inline constexpr int kMaxExprDepth = 256;
// Nodes of one expression, a shared subexpression counted at each use (what the printer
// writes and the emitter compiles).
inline constexpr int kMaxExprNodes = 4096;
// The bounds make() enforces on every node, as an internal error: room for what passes
// add to a user's expression (the softmax scale, the temporaries of CSE, derivatives).
inline constexpr int kMaxExprDepthInternal = 2 * kMaxExprDepth;
inline constexpr int kMaxExprNodesInternal = 8 * kMaxExprNodes;
// Captured tensors and runtime scalars of one spec (each is a kernel parameter).
inline constexpr int kMaxCapturedTensors = 32;
inline constexpr int kMaxRuntimeScalars = 32;
// Bytes of one JSON spec document, and of one expression given as text.
inline constexpr size_t kMaxSpecDocumentBytes = size_t(1) << 20;
// Int constants are int32 on the GPU: a literal outside this range is a UserError.
inline constexpr long long kMinIntLiteral = INT32_MIN;
inline constexpr long long kMaxIntLiteral = INT32_MAX;

inline bool fits_int_literal(long long v) { return v >= kMinIntLiteral && v <= kMaxIntLiteral; }

}  // namespace attnjit::dsl
