/* attnjit's C API: a stable C ABI over the JIT (spec -> compiled kernel -> launch) for
 * other languages (Python via ctypes, Rust, Elixir NIFs, XLA custom calls).
 *
 *   attnjit_spec* spec;    attnjit_spec_from_json(json, strlen(json), &spec);
 *   attnjit_kernel* k;     attnjit_compile(spec, NULL, &k);
 *   attnjit_launch_args a = ATTNJIT_LAUNCH_ARGS_INIT;  a.q = ...; a.k = ...; ...
 *   attnjit_launch(k, &a, stream);
 *
 * Rules:
 *  - Every function that can fail returns an attnjit_status. On failure the message is
 *    kept per thread until the next failing call: attnjit_last_error(). Nothing aborts,
 *    no C++ exception crosses this boundary. A failing call that has an out-pointer
 *    argument sets *out to NULL (when out itself is not NULL).
 *  - Functions that return a value instead of a status (counts, flags, strings) return
 *    -1 / NULL for a NULL handle and say why in attnjit_last_error().
 *  - A failed launch launches nothing and writes nothing.
 *  - Handles are immutable once made; a kernel may be launched from several threads.
 *  - Versioning: ATTNJIT_C_API_VERSION is bumped on any incompatible change (it is also
 *    the SONAME: libattnjit_c.so.1); compare attnjit_api_version() with it at start-up.
 *    Structs that may grow carry their size in `struct_size` (set it with the _INIT
 *    macros); a struct_size this library does not know is ATTNJIT_ERROR_INVALID_ARGUMENT.
 */
#ifndef ATTNJIT_C_H
#define ATTNJIT_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every function below is exported from libattnjit_c; everything else in the library is
 * hidden (it is built with -fvisibility=hidden and a version script). */
#if defined(_WIN32)
#if defined(ATTNJIT_C_BUILDING)
#define ATTNJIT_C_EXPORT __declspec(dllexport)
#else
#define ATTNJIT_C_EXPORT __declspec(dllimport)
#endif
#else
#define ATTNJIT_C_EXPORT __attribute__((visibility("default")))
#endif

#define ATTNJIT_C_API_VERSION 1

typedef enum attnjit_status {
    ATTNJIT_OK = 0,
    ATTNJIT_ERROR_INVALID_ARGUMENT = 1, /* the caller's mistake: bad spec, tensor, pointer, name */
    ATTNJIT_ERROR_PARSE = 2,            /* a textual spec did not parse; the message has line:column */
    ATTNJIT_ERROR_ENVIRONMENT = 3,      /* no GPU/driver/NVRTC, a CUDA call failed, cache I/O */
    ATTNJIT_ERROR_INTERNAL = 4          /* a bug in attnjit (includes NVRTC rejecting generated code) */
} attnjit_status;

/* Element types; the values are part of the ABI. */
typedef enum attnjit_dtype {
    ATTNJIT_F16 = 0,
    ATTNJIT_BF16 = 1,
    ATTNJIT_F32 = 2,
    ATTNJIT_I32 = 3,
    ATTNJIT_I64 = 4,
    ATTNJIT_U8 = 5
} attnjit_dtype;

typedef struct attnjit_spec attnjit_spec;     /* opaque: a validated AttentionSpec */
typedef struct attnjit_kernel attnjit_kernel; /* opaque: a compiled (and, with a GPU, loaded) kernel */

#define ATTNJIT_MAX_RANK 8

/* A device tensor: shape and strides in elements (not bytes), outermost first. Only the
 * first `rank` entries of shape and strides are read. */
typedef struct attnjit_tensor {
    void* data;
    int32_t dtype; /* attnjit_dtype */
    int32_t rank;  /* in [0, ATTNJIT_MAX_RANK] */
    int64_t shape[8];
    int64_t strides[8];
} attnjit_tensor;
#define ATTNJIT_TENSOR_INIT {NULL, 0, 0, {0}, {0}}

ATTNJIT_C_EXPORT int32_t attnjit_api_version(void);             /* ATTNJIT_C_API_VERSION of the library */
ATTNJIT_C_EXPORT const char* attnjit_version_string(void);      /* e.g. "0.1.0" */
ATTNJIT_C_EXPORT const char* attnjit_status_name(int32_t status); /* "ATTNJIT_OK", ...; never null */
/* The message of the last failed call on this thread ("" if none): it starts with the
 * function's name. Kept, and the pointer valid, until the next failing call on this thread;
 * successful calls leave it alone. */
ATTNJIT_C_EXPORT const char* attnjit_last_error(void);

/* ---- specs ---------------------------------------------------------------------- */

/* Parses and validates a JSON spec (docs/spec_format.md). */
ATTNJIT_C_EXPORT attnjit_status attnjit_spec_from_json(const char* json, size_t length, attnjit_spec** out);
/* The canonical JSON of a spec; free it with attnjit_free_string. */
ATTNJIT_C_EXPORT attnjit_status attnjit_spec_to_json(const attnjit_spec* spec, char** out);
ATTNJIT_C_EXPORT void attnjit_free_string(char* s);
ATTNJIT_C_EXPORT attnjit_status attnjit_spec_hash(const attnjit_spec* spec, uint64_t* out);
ATTNJIT_C_EXPORT void attnjit_spec_destroy(attnjit_spec* spec); /* null is fine */

/* ---- compiling -------------------------------------------------------------------- */

typedef struct attnjit_compile_options {
    uint32_t struct_size; /* sizeof(attnjit_compile_options) */
    const char* arch;     /* "sm_80", "sm_90a", ...; null: the current GPU's */
    /* Tile configuration; a zero field takes the value of attnjit's default tile for the
     * spec (all zero: the default tile). On sm_90a the forward's Hopper loop takes 128 query
     * rows with 12 warps or 192 with 16: block_m or warps given alone completes the other. */
    int32_t block_m, block_n, warps, stages;
    /* attnjit_compile_backward only: 1 allows the fast backward, whose dQ is summed with
     * fp32 atomics (its bits may change from run to run), where it exists (fp16 / bf16,
     * head dims 64 and 128); 0 (the default): deterministic. Added after version 1's first
     * release: a struct_size that ends before it reads as 0. */
    int32_t fast_backward;
    /* attnjit_compile_backward only: the captured tensors and runtime scalars whose
     * gradients the backward computes (attnjit_grad_args' input_grads); any runs the
     * deterministic backward. Added after fast_backward: a struct_size that ends before
     * them reads as none. */
    const char* const* grad_names;
    int32_t num_grads;
    /* attnjit_compile only: the forward's main loop, an ATTNJIT_MAINLOOP_* value. AUTO (0):
     * sm90 (TMA + wgmma) on sm_90a where it carries the spec, else sm80 (f16 / bf16) or simt
     * (f32); SM80 / SM90 force that loop (an error where it cannot run the spec). Added after
     * grad_names with `autotune` (then `reserved`, 0), which makes the struct longer than the one
     * before: a struct_size that ends before them reads as AUTO. */
    int32_t mainloop;
    /* An ATTNJIT_AUTOTUNE_* value. DEFAULT (0): as ATTNJIT_AUTOTUNE says (off unless it is set);
     * ON: tune the tile on the first launch of each shape bucket (attnjit_compile: the forward's;
     * attnjit_compile_backward: its key-tile kernel's, unless it computes gradients of captured
     * tensors; docs/autotune.md); OFF: never. Was `reserved` (always 0), so older callers read
     * DEFAULT. */
    int32_t autotune;
} attnjit_compile_options;
#define ATTNJIT_COMPILE_OPTIONS_INIT {sizeof(attnjit_compile_options), NULL, 0, 0, 0, 0, 0, NULL, 0, 0, 0}
#define ATTNJIT_MAINLOOP_AUTO 0
#define ATTNJIT_MAINLOOP_SM80 1
#define ATTNJIT_MAINLOOP_SM90 2
#define ATTNJIT_AUTOTUNE_DEFAULT 0
#define ATTNJIT_AUTOTUNE_ON 1
#define ATTNJIT_AUTOTUNE_OFF 2

/* Generates, compiles (memory cache, then disk cache, then NVRTC) and, when a GPU is
 * present, loads the kernel into the current CUDA context (the primary one if none is
 * current). options may be null. With no GPU and an explicit arch it only compiles. */
ATTNJIT_C_EXPORT attnjit_status attnjit_compile(const attnjit_spec* spec,
                                                const attnjit_compile_options* options, attnjit_kernel** out);
ATTNJIT_C_EXPORT void attnjit_kernel_destroy(attnjit_kernel* kernel); /* null is fine */

/* 1 if the kernel was loaded on a GPU and can be launched, else 0 (also for NULL). */
ATTNJIT_C_EXPORT int32_t attnjit_kernel_can_launch(const attnjit_kernel* kernel);
/* The generated CUDA source (valid while the kernel lives; generated on first call, NULL
 * if that fails) and the arch it targets. */
ATTNJIT_C_EXPORT const char* attnjit_kernel_source(const attnjit_kernel* kernel);
ATTNJIT_C_EXPORT const char* attnjit_kernel_arch(const attnjit_kernel* kernel);
/* Seconds spent generating + compiling (or reading the disk cache); 0 for a memory hit,
 * -1 for NULL. */
ATTNJIT_C_EXPORT double attnjit_kernel_compile_seconds(const attnjit_kernel* kernel);
/* The spec the kernel was compiled from (owned by the kernel). */
ATTNJIT_C_EXPORT const attnjit_spec* attnjit_kernel_spec(const attnjit_kernel* kernel);

/* ---- what a launch needs ------------------------------------------------------------
 * Besides q, k, v, o (and lse when the spec returns it), a spec reads captured tensors and
 * runtime scalars by name. Index i in [0, count) lists them sorted by name; that order is
 * also the positional order of attnjit_launch_args. Strings live as long as the spec. */
ATTNJIT_C_EXPORT int32_t attnjit_spec_returns_lse(const attnjit_spec* spec);
ATTNJIT_C_EXPORT int32_t attnjit_spec_num_tensors(const attnjit_spec* spec);
ATTNJIT_C_EXPORT attnjit_status attnjit_spec_tensor(const attnjit_spec* spec, int32_t i, const char** name,
                                                    int32_t* dtype, int32_t* rank);
ATTNJIT_C_EXPORT int32_t attnjit_spec_num_scalars(const attnjit_spec* spec);
/* is_int: 1 for an int scalar, 0 for a float one (both are passed as double). */
ATTNJIT_C_EXPORT attnjit_status attnjit_spec_scalar(const attnjit_spec* spec, int32_t i, const char** name,
                                                    int32_t* is_int);

/* ---- launching -------------------------------------------------------------------- */

typedef struct attnjit_launch_args {
    uint32_t struct_size; /* sizeof(attnjit_launch_args) */
    attnjit_tensor q;     /* [B, Hq, Nq, Dqk] any strides, unit stride on the last dim */
    attnjit_tensor k;     /* [B, Hkv, Nk, Dqk] */
    attnjit_tensor v;     /* [B, Hkv, Nk, Dv] */
    attnjit_tensor o;     /* [B, Hq, Nq, Dv], written */
    const attnjit_tensor* lse; /* [B, Hq, Nq] f32; required iff the spec returns LSE, else null */
    /* Captured tensors and scalars: exactly those the spec reads (num_tensors ==
     * attnjit_spec_num_tensors, num_scalars == attnjit_spec_num_scalars). names null:
     * positional, in the spec's order (above); otherwise any order, matched by name.
     * The arrays may be null when their count is 0. */
    int32_t num_tensors;
    const char* const* tensor_names;
    const attnjit_tensor* tensors;
    int32_t num_scalars;
    const char* const* scalar_names;
    const double* scalars;
} attnjit_launch_args;
#define ATTNJIT_LAUNCH_ARGS_INIT                                                                    \
    {sizeof(attnjit_launch_args), ATTNJIT_TENSOR_INIT, ATTNJIT_TENSOR_INIT, ATTNJIT_TENSOR_INIT,      \
     ATTNJIT_TENSOR_INIT, NULL, 0, NULL, NULL, 0, NULL, NULL}

/* Checks every argument against the spec (ATTNJIT_ERROR_INVALID_ARGUMENT, nothing launched
 * on failure), then launches asynchronously on `stream` (a CUstream / cudaStream_t; null
 * is the legacy default stream). */
ATTNJIT_C_EXPORT attnjit_status attnjit_launch(const attnjit_kernel* kernel, const attnjit_launch_args* args,
                                               void* stream);

/* ---- training: the backward ------------------------------------------------------------
 * dQ, dK and dV of a spec that returns LSE, with the derivative of score_mod derived from
 * the spec; deterministic by default: the same inputs give the same bits (fp16 / bf16 at
 * head dims 64 and 128: one fused kernel, dQ summed in a fixed order; otherwise two
 * kernels; attnjit::AttentionBackward says which). Gradients of captured tensors and
 * runtime scalars: name them in attnjit_compile_options.grad_names and pass their outputs
 * in attnjit_grad_args. */
typedef struct attnjit_backward attnjit_backward; /* opaque: the compiled backward kernels */

/* As attnjit_compile, for the backward of `spec` (which must return LSE). The tile fields of
 * options apply to the backward kernels that own tiles (zero: the backward's default tile). */
ATTNJIT_C_EXPORT attnjit_status attnjit_compile_backward(const attnjit_spec* spec,
                                                         const attnjit_compile_options* options,
                                                         attnjit_backward** out);
ATTNJIT_C_EXPORT void attnjit_backward_destroy(attnjit_backward* backward); /* null is fine */
/* 1 if its kernels were loaded on a GPU and can be launched, else 0 (also for NULL). */
ATTNJIT_C_EXPORT int32_t attnjit_backward_can_launch(const attnjit_backward* backward);

typedef struct attnjit_grad_args {
    uint32_t struct_size; /* sizeof(attnjit_grad_args) */
    attnjit_tensor d_o;   /* [B, Hq, Nq, Dv] the loss's gradient with respect to o, the spec's dtype */
    attnjit_tensor dq;    /* [B, Hq, Nq, Dqk] written */
    attnjit_tensor dk;    /* [B, Hkv, Nk, Dqk] written (summed over the query heads of a group) */
    attnjit_tensor dv;    /* [B, Hkv, Nk, Dv] written */
    /* The gradients of the captured tensors and scalars named in the options' grad_names,
     * written (every element): input_grads[i] is the gradient of input_grad_names[i]. A
     * tensor's has its shape and dtype; stride 0 only where the captured tensor has stride 0
     * (that element receives the sum over the dimension; a real stride there gets each
     * index's own); a scalar's is a rank-0 f32 tensor. Attention sinks ("sinks" in the spec)
     * and an output gate ("gate" in the spec) are named here too: [Hq] in the sinks' dtype,
     * [B, Hq, Nq, Dv] in the spec's dtype for the gate (no stride 0), each optional: absent,
     * it gets no gradient. Added after dv: a struct_size that ends before them reads as none. */
    const char* const* input_grad_names;
    const attnjit_tensor* input_grads;
    int32_t num_input_grads;
} attnjit_grad_args;
#define ATTNJIT_GRAD_ARGS_INIT                                                                      \
    {sizeof(attnjit_grad_args), ATTNJIT_TENSOR_INIT, ATTNJIT_TENSOR_INIT, ATTNJIT_TENSOR_INIT,        \
     ATTNJIT_TENSOR_INIT, NULL, NULL, 0}

/* args: the forward's launch arguments once it has run (its o and lse among them). Checks
 * every argument (ATTNJIT_ERROR_INVALID_ARGUMENT, nothing launched on failure), then
 * launches the backward's kernels asynchronously on `stream`. */
ATTNJIT_C_EXPORT attnjit_status attnjit_launch_backward(const attnjit_backward* backward,
                                                        const attnjit_launch_args* args,
                                                        const attnjit_grad_args* grads, void* stream);

/* ---- kernel bundles: kernels compiled ahead of time (attnjit-aot, docs/aot.md) -------------
 * A process looks for a kernel in memory, then in the bundles loaded or linked here, then in
 * its disk cache, then compiles it with NVRTC: one whose kernels are all bundled never loads
 * NVRTC. */

/* Opens the bundle directory attnjit-aot wrote (--out) and adds it to this process's bundles.
 * *num_kernels (when not null) receives how many kernels it holds. Fails
 * (ATTNJIT_ERROR_INVALID_ARGUMENT) for a directory that is not a bundle, or one made by another
 * attnjit (rebuild it with this version's attnjit-aot). */
ATTNJIT_C_EXPORT attnjit_status attnjit_load_bundle(const char* directory, int64_t* num_kernels);
/* How many bundles this process has (loaded and linked). */
ATTNJIT_C_EXPORT int32_t attnjit_num_bundles(void);
/* What the source generated by attnjit_add_kernel_bundle(... C_API) calls at start-up to add
 * a bundle linked into the program; not for hand-written code. A bundle that cannot be used is
 * said on stderr and in the message of a kernel nothing provides; it never fails the program. */
ATTNJIT_C_EXPORT int32_t attnjit_register_linked_bundle(const char* name, const char* manifest, size_t manifest_size,
                                                        const unsigned char* const* entries, const size_t* sizes,
                                                        size_t count);

#ifdef __cplusplus
}
#endif

#endif /* ATTNJIT_C_H */
