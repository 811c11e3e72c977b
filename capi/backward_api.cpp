// The backward from C: attnjit_compile_backward wraps attnjit::AttentionBackward, and
// attnjit_launch_backward converts the forward's launch arguments (launch_args.h) and the
// gradient tensors, then launches the backward's kernels.
#include <cstddef>

#include "capi/handles.h"
#include "capi/launch_args.h"
#include "capi/status.h"
#include "runtime/device.h"
#include "support/error.h"

using attnjit::capi::guarded;

namespace {

// Per thread: the gradient views of the last launch (their shape vectors keep their
// storage, so a repeated launch allocates nothing).
thread_local attnjit::GradArgs grad_scratch;

// Callers built before input_grads existed pass the shorter struct.
constexpr size_t kBeforeInputGrads = offsetof(attnjit_grad_args, input_grad_names);

void fill_grads(const attnjit_grad_args& g) {
    using attnjit::capi::ArgName;
    attnjit::capi::to_view(g.d_o, ArgName{"d_o", -1, nullptr, "grads"}, grad_scratch.d_o);
    attnjit::capi::to_view(g.dq, ArgName{"dq", -1, nullptr, "grads"}, grad_scratch.dq);
    attnjit::capi::to_view(g.dk, ArgName{"dk", -1, nullptr, "grads"}, grad_scratch.dk);
    attnjit::capi::to_view(g.dv, ArgName{"dv", -1, nullptr, "grads"}, grad_scratch.dv);
    grad_scratch.grads.clear();
    if (g.struct_size <= kBeforeInputGrads) return;
    user_check(g.num_input_grads >= 0 && (g.num_input_grads == 0 || (g.input_grad_names && g.input_grads)))
        << "grads->num_input_grads is " << g.num_input_grads
        << " but input_grad_names or input_grads is NULL; pass one name and one tensor per gradient";
    for (int32_t i = 0; i < g.num_input_grads; ++i) {
        const char* name = g.input_grad_names[i];
        user_check(name && *name) << "grads->input_grad_names[" << i << "] is null or empty";
        user_check(!grad_scratch.grads.count(name)) << "grads->input_grad_names names '" << name << "' twice";
        attnjit::capi::to_view(g.input_grads[i], ArgName{"input_grads", i, name, "grads"},
                               grad_scratch.grads[name]);
    }
}

}  // namespace

extern "C" {

attnjit_status attnjit_compile_backward(const attnjit_spec* spec, const attnjit_compile_options* options,
                                        attnjit_backward** out) {
    return guarded("attnjit_compile_backward", [&] {
        user_check(out) << "argument 'out' is null; pass the address of an attnjit_backward* to receive it";
        *out = nullptr;
        user_check(spec) << "argument 'spec' is null; pass a spec made by attnjit_spec_from_json";
        user_check(spec->spec.returns_lse())
            << "the spec does not return LSE, which the backward reads; set \"return_lse\": true in the spec "
               "(and use the same spec for the forward)";
        *out = new attnjit_backward(
            *spec, attnjit::capi::to_compile_options(spec->spec, options, attnjit::KernelKind::backward_dkdv));
    });
}

void attnjit_backward_destroy(attnjit_backward* backward) { delete backward; }

int32_t attnjit_backward_can_launch(const attnjit_backward* backward) {
    return backward && backward->backward.can_launch() ? 1 : 0;
}

attnjit_status attnjit_launch_backward(const attnjit_backward* backward, const attnjit_launch_args* args,
                                       const attnjit_grad_args* grads, void* stream) {
    return guarded("attnjit_launch_backward", [&] {
        user_check(backward) << "argument 'backward' is null; pass the result of attnjit_compile_backward";
        user_check(args) << "argument 'args' is null; pass the forward's launch arguments";
        user_check(grads) << "argument 'grads' is null; pass gradient arguments initialised with "
                             "ATTNJIT_GRAD_ARGS_INIT";
        user_check(args->struct_size == sizeof(attnjit_launch_args))
            << "args->struct_size is " << args->struct_size << " but this library (C API version "
            << ATTNJIT_C_API_VERSION << ") expects " << sizeof(attnjit_launch_args)
            << "; initialise the struct with ATTNJIT_LAUNCH_ARGS_INIT from the header of the library you load";
        user_check(grads->struct_size == sizeof(attnjit_grad_args) || grads->struct_size == kBeforeInputGrads)
            << "grads->struct_size is " << grads->struct_size << " but this library (C API version "
            << ATTNJIT_C_API_VERSION << ") expects " << sizeof(attnjit_grad_args)
            << "; initialise the struct with ATTNJIT_GRAD_ARGS_INIT from the header of the library you load";
        attnjit::capi::Scratch& s = attnjit::capi::scratch_for(backward->id, backward->spec);
        attnjit::capi::fill(s, backward->spec, *args);
        fill_grads(*grads);
        if (!backward->backward.can_launch()) {
            // Arguments are checked first, so a caller sees the same errors on every machine.
            backward->backward.check_args(s.args, grad_scratch);
            if (auto why = attnjit::runtime::why_no_gpu())
                throw attnjit::EnvironmentError("this backward was compiled without a usable GPU (" + *why +
                                                "), so it cannot launch; compile it where the GPU is, with "
                                                "options->arch NULL");
            user_error << "this backward was compiled for another arch than the current GPU's (options->arch), "
                          "so it cannot launch; compile it with options->arch NULL";
        }
        backward->backward(s.args, grad_scratch, stream);  // checks every argument, then launches
    });
}

}  // extern "C"
