#include "codegen/params_layout.h"

#include "attnjit/backward/args.h"
#include "attnjit/backward/grad_args.h"
#include "attnjit/backward/latent_gemm_args.h"
#include "attnjit/backward/sink_grad_args.h"
#include "codegen/kernel_plan.h"
#include "attnjit/forward/args.h"
#include "codegen/cuda_emitter.h"
#include "support/error.h"

namespace attnjit::codegen {

const char* params_field_kind_name(ParamsField::Kind k) {
    switch (k) {
    case ParamsField::Kind::Args: return "args";
    case ParamsField::Kind::FloatScalar: return "float scalar";
    case ParamsField::Kind::IntScalar: return "int scalar";
    case ParamsField::Kind::Tensor: return "tensor";
    case ParamsField::Kind::Grad: return "gradient";
    case ParamsField::Kind::GradWork: return "gradient workspace";
    }
    return "?";
}

const ParamsField* ParamsLayout::find(const std::string& name) const {
    for (const auto& f : fields)
        if (f.name == name) return &f;
    return nullptr;
}

namespace {

int round_up(int x, int a) { return (x + a - 1) / a * a; }

// The device pointer and long long are 8 bytes on every target NVRTC supports (64-bit),
// as on the host; ForwardArgs's size comes from the same header NVRTC compiles.
constexpr int kPointerBytes = 8;
constexpr int kStrideBytes = 8;

void place(ParamsLayout& l, ParamsField f) {
    f.offset = round_up(l.size, f.align);
    l.size = f.offset + f.size;
    if (f.align > l.align) l.align = f.align;
    l.fields.push_back(std::move(f));
}

// The fixed argument block of each kernel kind (one header per kind, shared with NVRTC).
ParamsField args_block(KernelKind kind) {
    ParamsField args;
    args.name = "args";
    args.kind = ParamsField::Kind::Args;
    args.c_name = "args";
    switch (kind) {
    case KernelKind::forward:
        args.size = static_cast<int>(sizeof(attnjit::ForwardArgs));
        args.align = static_cast<int>(alignof(attnjit::ForwardArgs));
        args.c_type = "attnjit::ForwardArgs";
        return args;
    case KernelKind::backward_dkdv:
    case KernelKind::backward_dq:
    case KernelKind::backward_stats:
    case KernelKind::backward_fused:
    case KernelKind::backward_dq_convert:
        args.size = static_cast<int>(sizeof(attnjit::BackwardArgs));
        args.align = static_cast<int>(alignof(attnjit::BackwardArgs));
        args.c_type = "attnjit::BackwardArgs";
        return args;
    case KernelKind::backward_sink_grad:
        args.size = static_cast<int>(sizeof(attnjit::SinkGradArgs));
        args.align = static_cast<int>(alignof(attnjit::SinkGradArgs));
        args.c_type = "attnjit::SinkGradArgs";
        return args;
    case KernelKind::latent_gemm:
        args.size = static_cast<int>(sizeof(attnjit::LatentGemmArgs));
        args.align = static_cast<int>(alignof(attnjit::LatentGemmArgs));
        args.c_type = "attnjit::LatentGemmArgs";
        return args;
    }
    internal_error << "no argument block for kernel kind " << static_cast<int>(kind);
    return args;
}

}  // namespace

ParamsLayout params_layout(const dsl::AttentionSpec& spec, KernelKind kind) {
    return params_layout(spec_inputs(spec), kind);
}

std::string grad_field(const std::string& name) { return "grad_" + name; }

ParamsLayout params_layout(const SpecInputs& inputs, KernelKind kind, const std::vector<InputGradOutput>& grads,
                           bool grad_work) {
    ParamsLayout l = params_layout(inputs, kind);
    if (grads.empty() && !grad_work) return l;
    for (const auto& g : grads) {
        ParamsField f;
        f.name = g.name;
        f.kind = ParamsField::Kind::Grad;
        f.dtype = g.scalar ? DType::f32 : g.dtype;
        f.rank = g.scalar ? 0 : g.rank;
        const int dims = f.rank > 0 ? f.rank : 1;
        f.size = 2 * kPointerBytes + 8 + 2 * 4 + 2 * kStrideBytes * dims;  // backward/grad_args.h
        f.align = kPointerBytes;
        f.c_name = grad_field(g.name);
        f.c_type = std::string("attnjit::GradArg<") + cuda_elem_type(f.dtype) + ", " + std::to_string(f.rank) + ">";
        place(l, f);
    }
    if (grad_work) {
        ParamsField f;
        f.name = "grad_work";
        f.kind = ParamsField::Kind::GradWork;
        f.size = static_cast<int>(sizeof(attnjit::GradWork));
        f.align = static_cast<int>(alignof(attnjit::GradWork));
        f.c_name = "grad_work";
        f.c_type = "attnjit::GradWork";
        place(l, f);
    }
    l.size = round_up(l.size, l.align);
    return l;
}

ParamsLayout params_layout(const SpecInputs& inputs, KernelKind kind) {
    static_assert(sizeof(void*) == kPointerBytes && sizeof(long long) == kStrideBytes,
                  "attnjit assumes a 64-bit host with the device's pointer and long long sizes");
    ParamsLayout l;
    place(l, args_block(kind));

    for (const auto& [name, type] : inputs.scalars) {  // std::map: sorted by name
        ParamsField f;
        f.name = name;
        f.kind = type == dsl::Type::Float ? ParamsField::Kind::FloatScalar : ParamsField::Kind::IntScalar;
        f.dtype = type == dsl::Type::Float ? DType::f32 : DType::i32;
        f.size = f.align = 4;
        f.c_name = scalar_field(name);
        f.c_type = type == dsl::Type::Float ? "float" : "int";
        place(l, f);
    }
    for (const auto& [name, info] : inputs.tensors) {
        ParamsField f;
        f.name = name;
        f.kind = ParamsField::Kind::Tensor;
        f.dtype = info.dtype;
        f.rank = info.rank;
        f.size = kPointerBytes + kStrideBytes * info.rank;
        f.align = kPointerBytes;
        f.c_name = tensor_field(name);
        f.c_type = std::string("attnjit::TensorArg<") + cuda_elem_type(info.dtype) + ", " + std::to_string(info.rank) + ">";
        place(l, f);
    }
    l.size = round_up(l.size, l.align);
    return l;
}

std::ostream& operator<<(std::ostream& os, const ParamsLayout& l) {
    os << "ParamsLayout (" << l.size << " bytes, align " << l.align << ") {\n";
    for (const auto& f : l.fields)
        os << "  " << f.offset << "\t" << f.size << "\t" << f.c_type << " " << f.c_name << ";  // "
           << params_field_kind_name(f.kind) << (f.kind == ParamsField::Kind::Args ? "" : " '" + f.name + "'") << "\n";
    return os << "}";
}

}  // namespace attnjit::codegen
