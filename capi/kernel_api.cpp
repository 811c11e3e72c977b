// Kernel handles: attnjit_compile wraps attnjit::Attention (generate, compile through the
// caches, load when a GPU is there) and the queries read it back.
#include <cstddef>
#include <optional>
#include <string>

#include "capi/handles.h"
#include "capi/status.h"
#include "codegen/kernel_config.h"
#include "runtime/device.h"
#include "support/error.h"

using attnjit::capi::guarded;

namespace attnjit::capi {

namespace {

// c is not null.
CompileOptions with_options(const dsl::AttentionSpec& spec, const attnjit_compile_options* c, KernelKind kind) {
    CompileOptions o;
    // Callers built before fast_backward existed pass the shorter struct.
    constexpr size_t kBeforeFastBackward = offsetof(attnjit_compile_options, fast_backward);
    // ... and before grad_names (the size of the struct that ended with fast_backward).
    constexpr size_t kBeforeGrads = offsetof(attnjit_compile_options, grad_names);
    // ... and before mainloop (the struct that ended with num_grads, padded as C pads it:
    // mainloop sits in that padding, `autotune` (once `reserved`) makes the new struct longer).
    constexpr size_t kBeforeMainloop =
        (offsetof(attnjit_compile_options, num_grads) + sizeof(int32_t) + alignof(attnjit_compile_options) - 1) /
        alignof(attnjit_compile_options) * alignof(attnjit_compile_options);
    static_assert(kBeforeMainloop < sizeof(attnjit_compile_options), "a struct with mainloop is longer than one without");
    user_check(c->struct_size == sizeof(attnjit_compile_options) || c->struct_size == kBeforeFastBackward ||
               c->struct_size == kBeforeGrads || c->struct_size == kBeforeMainloop)
        << "options->struct_size is " << c->struct_size << " but this library (C API version "
        << ATTNJIT_C_API_VERSION << ") expects " << sizeof(attnjit_compile_options)
        << "; initialise the struct with ATTNJIT_COMPILE_OPTIONS_INIT from the header of the library you load";
    if (c->arch) {
        user_check(*c->arch) << "options->arch is empty; pass an architecture such as \"sm_90a\", or NULL "
                                "for the current GPU's";
        o.arch = std::string(c->arch);
    }
    if (c->struct_size > kBeforeFastBackward) {
        user_check(c->fast_backward == 0 || c->fast_backward == 1)
            << "options->fast_backward is " << c->fast_backward << "; pass 0 (deterministic) or 1";
        o.deterministic = c->fast_backward == 0;
    }
    if (c->struct_size > kBeforeGrads) {
        user_check(c->num_grads >= 0 && (c->num_grads == 0 || c->grad_names))
            << "options->num_grads is " << c->num_grads << " with grad_names " << (c->grad_names ? "set" : "NULL")
            << "; pass the names of the captured tensors and scalars that need gradients";
        for (int32_t i = 0; i < c->num_grads; ++i) {
            user_check(c->grad_names[i] && *c->grad_names[i]) << "options->grad_names[" << i << "] is null or empty";
            user_check(o.grads.insert(c->grad_names[i]).second)
                << "options->grad_names names '" << c->grad_names[i] << "' twice";
        }
    }
    if (c->struct_size > kBeforeMainloop) {
        user_check(c->mainloop >= ATTNJIT_MAINLOOP_AUTO && c->mainloop <= ATTNJIT_MAINLOOP_SM90)
            << "options->mainloop is " << c->mainloop
            << "; pass ATTNJIT_MAINLOOP_AUTO (0), ATTNJIT_MAINLOOP_SM80 (1) or ATTNJIT_MAINLOOP_SM90 (2)";
        user_check(c->autotune >= ATTNJIT_AUTOTUNE_DEFAULT && c->autotune <= ATTNJIT_AUTOTUNE_OFF)
            << "options->autotune is " << c->autotune
            << "; pass ATTNJIT_AUTOTUNE_DEFAULT (0), ATTNJIT_AUTOTUNE_ON (1) or ATTNJIT_AUTOTUNE_OFF (2)";
        if (c->autotune != ATTNJIT_AUTOTUNE_DEFAULT) o.autotune = c->autotune == ATTNJIT_AUTOTUNE_ON;
        // The forward's loop, or the backward's (AttentionBackward: its key-tile kernel's).
        if (c->mainloop == ATTNJIT_MAINLOOP_SM80) o.mainloop = MainloopKind::sm80;
        if (c->mainloop == ATTNJIT_MAINLOOP_SM90) o.mainloop = MainloopKind::sm90;
    }
    const int32_t fields[] = {c->block_m, c->block_n, c->warps, c->stages};
    const char* names[] = {"block_m", "block_n", "warps", "stages"};
    bool any = false;
    for (int f = 0; f < 4; ++f) {
        user_check(fields[f] >= 0) << "options->" << names[f] << " is " << fields[f]
                                   << "; pass a positive value, or 0 for the default tile's";
        any = any || fields[f] != 0;
    }
    if (any) {
        // Unset fields come from the default tile for the arch the kernel will be built for.
        const std::string arch =
            o.arch ? *o.arch : runtime::why_no_gpu() ? "sm_80" : runtime::current_device().arch();
        // The sm90 forward's rows and warps go together (a consumer warpgroup per 64 rows): one
        // given alone completes the other. Unforced, a pair of another shape (not 128 rows with
        // 12 warps or 192 with 16) means sm80. A backward's tile is its sm80 kernels' (the sm90
        // one takes its own).
        const int rows = c->block_m ? c->block_m : sm90_forward_block_m(c->warps);
        const int warps = c->warps ? c->warps : sm90_forward_warps(rows);
        std::optional<MainloopKind> loop = kind == KernelKind::forward ? o.mainloop : std::nullopt;
        if (!loop && kind == KernelKind::forward && c->warps != 0 && !is_sm90_forward_tile(rows, warps) &&
            codegen::elem_kind(spec.dtype()) != ElemKind::f32)
            loop = MainloopKind::sm80;
        const KernelConfig base = codegen::make_config(spec, kind, arch, std::nullopt, loop);
        TileConfig t = base.tile;
        if (c->block_m) t.block_m = c->block_m;
        if (c->block_n) t.block_n = c->block_n;
        if (c->warps) t.warps = c->warps;
        if (c->stages) t.stages = c->stages;
        // So block_m = 128 alone works where the default is 192 rows.
        if (kind == KernelKind::forward && base.mainloop == MainloopKind::sm90 && (c->block_m || c->warps)) {
            t.block_m = rows;
            t.warps = warps;
        }
        o.tile = t;
    }
    return o;
}

}  // namespace

CompileOptions to_compile_options(const dsl::AttentionSpec& spec, const attnjit_compile_options* c,
                                  KernelKind kind) {
    CompileOptions o;
    if (c) o = with_options(spec, c, kind);
    if (!o.arch) {
        // The C++ API calls this a usage error; to a C caller it is the environment.
        if (auto why = runtime::why_no_gpu())
            throw EnvironmentError("no GPU is usable (" + *why +
                                   "); to compile without one, set options->arch (e.g. \"sm_90a\")");
    }
    return o;
}

}  // namespace attnjit::capi

namespace {

// Value-returning queries report a null kernel through the last error.
void null_kernel(const char* function) {
    attnjit::capi::fail(ATTNJIT_ERROR_INVALID_ARGUMENT, function,
                        "argument 'kernel' is null; pass a kernel made by attnjit_compile");
}

}  // namespace

extern "C" {

attnjit_status attnjit_compile(const attnjit_spec* spec, const attnjit_compile_options* options,
                               attnjit_kernel** out) {
    return guarded("attnjit_compile", [&] {
        user_check(out) << "argument 'out' is null; pass the address of an attnjit_kernel* to receive the kernel";
        *out = nullptr;
        user_check(spec) << "argument 'spec' is null; pass a spec made by attnjit_spec_from_json";
        *out = new attnjit_kernel(*spec,
                                  attnjit::capi::to_compile_options(spec->spec, options, attnjit::KernelKind::forward));
    });
}

void attnjit_kernel_destroy(attnjit_kernel* kernel) { delete kernel; }

int32_t attnjit_kernel_can_launch(const attnjit_kernel* kernel) {
    return kernel && kernel->attention.can_launch() ? 1 : 0;
}

const char* attnjit_kernel_source(const attnjit_kernel* kernel) {
    if (!kernel) {
        null_kernel("attnjit_kernel_source");
        return nullptr;
    }
    const char* text = nullptr;
    // Generated on first use (by Attention, once, thread-safely), so it can fail.
    attnjit_status s = guarded("attnjit_kernel_source", [&] { text = kernel->attention.source().source.c_str(); });
    return s == ATTNJIT_OK ? text : nullptr;
}

const char* attnjit_kernel_arch(const attnjit_kernel* kernel) {
    if (!kernel) {
        null_kernel("attnjit_kernel_arch");
        return nullptr;
    }
    return kernel->attention.arch().c_str();
}

double attnjit_kernel_compile_seconds(const attnjit_kernel* kernel) {
    if (!kernel) {
        null_kernel("attnjit_kernel_compile_seconds");
        return -1;
    }
    return kernel->attention.compile_seconds();
}

const attnjit_spec* attnjit_kernel_spec(const attnjit_kernel* kernel) {
    if (!kernel) {
        null_kernel("attnjit_kernel_spec");
        return nullptr;
    }
    return &kernel->spec;
}

}  // extern "C"
