// attnjit_launch: C launch arguments -> attnjit::LaunchArgs (launch_args.h) ->
// Attention::operator(). Called once per attention call from other languages, so the
// conversion is cheap: no spec re-validation, no JSON, and no allocation once a thread has
// launched the kernel before.
#include "capi/handles.h"
#include "capi/launch_args.h"
#include "capi/status.h"
#include "runtime/device.h"
#include "support/error.h"

namespace {

using attnjit::LaunchArgs;
using attnjit::capi::guarded;

// A kernel compiled without a GPU, or for another arch, cannot launch. Its arguments
// are still checked first, so a caller sees the same argument errors on every machine.
void refuse_compile_only_launch(const attnjit_kernel& k, const LaunchArgs& args) {
    attnjit::check_launch_args(k.spec.spec, args);
    if (auto why = attnjit::runtime::why_no_gpu())
        throw attnjit::EnvironmentError("this kernel was compiled for " + k.attention.arch() +
                                        " without a usable GPU (" + *why +
                                        "), so it cannot launch; compile it where the GPU is, with options->arch "
                                        "NULL");
    user_error << "this kernel was compiled for " << k.attention.arch()
               << " only (options->arch is not the current GPU's), so it cannot launch; compile it with "
                  "options->arch NULL to launch on the current GPU";
}

}  // namespace

extern "C" {

attnjit_status attnjit_launch(const attnjit_kernel* kernel, const attnjit_launch_args* args, void* stream) {
    return guarded("attnjit_launch", [&] {
        user_check(kernel) << "argument 'kernel' is null; pass a kernel made by attnjit_compile";
        user_check(args) << "argument 'args' is null; pass launch arguments initialised with "
                            "ATTNJIT_LAUNCH_ARGS_INIT";
        user_check(args->struct_size == sizeof(attnjit_launch_args))
            << "args->struct_size is " << args->struct_size << " but this library (C API version "
            << ATTNJIT_C_API_VERSION << ") expects " << sizeof(attnjit_launch_args)
            << "; initialise the struct with ATTNJIT_LAUNCH_ARGS_INIT from the header of the library you load";
        attnjit::capi::Scratch& s = attnjit::capi::scratch_for(kernel->id, kernel->spec);
        attnjit::capi::fill(s, kernel->spec, *args);
        if (!kernel->attention.can_launch()) refuse_compile_only_launch(*kernel, s.args);
        kernel->attention(s.args, stream);  // checks every argument before launching
    });
}

}  // extern "C"
