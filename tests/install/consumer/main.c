/* The C API from an installed attnjit: find_package(attnjit) + attnjit::attnjit_c.
 * Parses a spec, reads it back, frees it. Exit 0 and "c consumer ok" on success. */
#include <attnjit/attnjit_c.h>

#include <stdio.h>
#include <string.h>

int main(void) {
    const char* json = "{\"format\": \"attnjit.spec/1\", \"dtype\": \"bf16\", \"head_dim\": 64, "
                       "\"mask\": \"kv_idx <= q_idx\"}";
    attnjit_spec* spec = NULL;
    uint64_t hash = 0;
    if (attnjit_api_version() != ATTNJIT_C_API_VERSION) {
        fprintf(stderr, "library C API version %d, header %d\n", (int)attnjit_api_version(), ATTNJIT_C_API_VERSION);
        return 1;
    }
    if (attnjit_spec_from_json(json, strlen(json), &spec) != ATTNJIT_OK ||
        attnjit_spec_hash(spec, &hash) != ATTNJIT_OK) {
        fprintf(stderr, "%s\n", attnjit_last_error());
        return 1;
    }
    printf("attnjit %s, spec hash %016llx\n", attnjit_version_string(), (unsigned long long)hash);
    attnjit_spec_destroy(spec);
    printf("c consumer ok\n");
    return 0;
}
