/* The C API from C: this file is compiled as C99 with -Wall -Wextra -Wpedantic -Werror
 * (the header is valid C) and linked against libattnjit_c only (the ABI is usable from
 * C). Prints "c api ok" and exits 0 on success; prints what failed and exits 1 otherwise. */
#include <attnjit/attnjit_c.h>

#include <stdio.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n", __FILE__,   \
                    __LINE__, #cond, attnjit_last_error());                          \
            ++failures;                                                              \
        }                                                                            \
    } while (0)

static const char* const kSpec =
    "{\n"
    "  \"format\": \"attnjit.spec/1\",\n"
    "  \"dtype\": \"bf16\",\n"
    "  \"head_dim\": 128,\n"
    "  \"return_lse\": true,\n"
    "  \"scalars\": {\"window\": \"int\", \"cap\": \"float\"},\n"
    "  \"tensors\": {\"slopes\": {\"dtype\": \"f32\", \"rank\": 1}},\n"
    "  \"score_mod\": \"cap * tanh((score + slopes[h] * (kv_idx - q_idx)) / cap)\",\n"
    "  \"mask\": \"kv_idx <= q_idx && q_idx - kv_idx < window\"\n"
    "}\n";

/* The same spec with an expression that does not parse on line 8. */
static const char* const kBadSpec =
    "{\n"
    "  \"format\": \"attnjit.spec/1\",\n"
    "  \"dtype\": \"bf16\",\n"
    "  \"head_dim\": 128,\n"
    "  \"return_lse\": true,\n"
    "  \"scalars\": {\"window\": \"int\", \"cap\": \"float\"},\n"
    "  \"tensors\": {\"slopes\": {\"dtype\": \"f32\", \"rank\": 1}},\n"
    "  \"score_mod\": \"cap * tanh((score + ) / cap)\"\n"
    "}\n";

static void check_queries(const attnjit_spec* spec) {
    const char* name = NULL;
    int32_t dtype = -1, rank = -1, is_int = -1;
    CHECK(attnjit_spec_returns_lse(spec) == 1);
    CHECK(attnjit_spec_num_tensors(spec) == 1);
    CHECK(attnjit_spec_tensor(spec, 0, &name, &dtype, &rank) == ATTNJIT_OK);
    CHECK(name != NULL && strcmp(name, "slopes") == 0);
    CHECK(dtype == ATTNJIT_F32 && rank == 1);
    CHECK(attnjit_spec_num_scalars(spec) == 2);
    CHECK(attnjit_spec_scalar(spec, 0, &name, &is_int) == ATTNJIT_OK); /* sorted by name */
    CHECK(name != NULL && strcmp(name, "cap") == 0 && is_int == 0);
    CHECK(attnjit_spec_scalar(spec, 1, &name, &is_int) == ATTNJIT_OK);
    CHECK(name != NULL && strcmp(name, "window") == 0 && is_int == 1);
    CHECK(attnjit_spec_scalar(spec, 2, &name, &is_int) == ATTNJIT_ERROR_INVALID_ARGUMENT);
    CHECK(name == NULL);
}

static void check_round_trip(const attnjit_spec* spec) {
    char* json = NULL;
    attnjit_spec* again = NULL;
    uint64_t h1 = 0, h2 = 0;
    CHECK(attnjit_spec_to_json(spec, &json) == ATTNJIT_OK);
    if (!json) return;
    CHECK(attnjit_spec_from_json(json, strlen(json), &again) == ATTNJIT_OK);
    CHECK(attnjit_spec_hash(spec, &h1) == ATTNJIT_OK);
    CHECK(attnjit_spec_hash(again, &h2) == ATTNJIT_OK);
    CHECK(h1 == h2 && h1 != 0);
    attnjit_spec_destroy(again);
    attnjit_free_string(json);
}

/* NVRTC only (no GPU needed); a machine without NVRTC says so with ENVIRONMENT. */
static void check_compile(const attnjit_spec* spec) {
    attnjit_compile_options options = ATTNJIT_COMPILE_OPTIONS_INIT;
    attnjit_kernel* kernel = NULL;
    attnjit_status status;
    options.arch = "sm_80";
    status = attnjit_compile(spec, &options, &kernel);
    if (status == ATTNJIT_ERROR_ENVIRONMENT) {
        printf("compile skipped: %s\n", attnjit_last_error());
        return;
    }
    CHECK(status == ATTNJIT_OK);
    CHECK(kernel != NULL && strcmp(attnjit_kernel_arch(kernel), "sm_80") == 0);
    CHECK(kernel != NULL && strlen(attnjit_kernel_source(kernel)) > 0);
    attnjit_kernel_destroy(kernel);
}

static void check_errors(void) {
    attnjit_spec* spec = NULL;
    attnjit_status status = attnjit_spec_from_json(kBadSpec, strlen(kBadSpec), &spec);
    CHECK(status == ATTNJIT_ERROR_PARSE);
    CHECK(spec == NULL);
    CHECK(strstr(attnjit_last_error(), "attnjit_spec_from_json: spec:8:") != NULL);
    CHECK(strcmp(attnjit_status_name(status), "ATTNJIT_ERROR_PARSE") == 0);
    CHECK(attnjit_spec_from_json(kSpec, strlen(kSpec), NULL) == ATTNJIT_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(attnjit_last_error(), "'out'") != NULL);
}

int main(void) {
    attnjit_spec* spec = NULL;
    CHECK(attnjit_api_version() == ATTNJIT_C_API_VERSION);
    CHECK(strlen(attnjit_version_string()) > 0);
    CHECK(strcmp(attnjit_last_error(), "") == 0);
    {
        /* The backward's argument struct and its macro are plain C99. */
        attnjit_grad_args grads = ATTNJIT_GRAD_ARGS_INIT;
        CHECK(grads.struct_size == sizeof(attnjit_grad_args) && grads.dq.data == NULL);
        CHECK(attnjit_launch_backward(NULL, NULL, &grads, NULL) == ATTNJIT_ERROR_INVALID_ARGUMENT);
    }

    CHECK(attnjit_spec_from_json(kSpec, strlen(kSpec), &spec) == ATTNJIT_OK);
    if (spec) {
        check_queries(spec);
        check_round_trip(spec);
        check_compile(spec);
        attnjit_spec_destroy(spec);
    }
    check_errors();

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("c api ok\n");
    return 0;
}
