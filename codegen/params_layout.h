// ParamsLayout: the fields of the generated Params struct, in order, with C layout
// (offsets, sizes, alignment). The host launcher packs the kernel's one argument with
// exactly this object; the generated source static_asserts every field's size and
// alignment and the struct's size (NVRTC has no offsetof; with the same field order,
// C's layout rules then fix every offset), so NVRTC rejects any disagreement instead of
// the kernel reading garbage.
//
//   args      the kernel kind's argument block (attnjit::ForwardArgs for the forward,
//             templates/attnjit/forward/args.h), offset 0
//   scalars   one per runtime scalar, sorted by name: float or int, 4 bytes
//   tensors   one per captured tensor, sorted by name: attnjit::TensorArg<T, R>
//             = an 8-byte pointer and R int64 element strides
//   grads     backward_dq kernels asked for gradients of captured tensors or scalars
//             (KernelPlan::grad_outputs), in that order: attnjit::GradArg<T, R>
//             (backward/grad_args.h: a pointer, R strides, R sizes; a scalar: <float, 0>),
//             then attnjit::GradWork when some site is summed per CTA
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "attnjit/common/kernel_config.h"
#include "codegen/spec_inputs.h"
#include "dsl/attention_spec.h"
#include "support/dtype.h"

namespace attnjit::codegen {

struct ParamsField {
    enum class Kind { Args, FloatScalar, IntScalar, Tensor, Grad, GradWork };
    std::string name;    // the spec's name ("cap", "bias"); "args" for the argument block
    Kind kind = Kind::Args;
    DType dtype = DType::f32;  // scalar: f32 / i32; tensor: its element type
    int rank = 0;              // tensors only
    int offset = 0;  // bytes from the start of Params
    int size = 0;
    int align = 0;
    std::string c_name;  // field name in Params: "args", "scalar_cap", "tensor_bias"
    std::string c_type;  // "attnjit::ForwardArgs", "float", "attnjit::TensorArg<float, 4>"
};

const char* params_field_kind_name(ParamsField::Kind k);

struct ParamsLayout {
    std::vector<ParamsField> fields;  // args first, then scalars, then tensors
    int size = 0;                     // sizeof(Params)
    int align = 0;                    // alignof(Params)

    // The field for a spec name (scalar or tensor) or "args"; null when absent.
    const ParamsField* find(const std::string& name) const;
};

// The layout of a `kind` kernel's Params: the kind's argument block, then every scalar and
// tensor the spec declares (spec_inputs).
ParamsLayout params_layout(const SpecInputs& inputs, KernelKind kind);
// With the gradient outputs of a backward_dq plan (KernelPlan::grad_outputs; empty: the
// layout above) and, when grad_work, the GradWork field.
struct InputGradOutput;
ParamsLayout params_layout(const SpecInputs& inputs, KernelKind kind, const std::vector<InputGradOutput>& grads,
                           bool grad_work);
std::string grad_field(const std::string& name);  // "grad_<name>"
// The same from the spec (validates it; for tools and tests).
ParamsLayout params_layout(const dsl::AttentionSpec& spec, KernelKind kind);

std::ostream& operator<<(std::ostream& os, const ParamsLayout& l);

}  // namespace attnjit::codegen
