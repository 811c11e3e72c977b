// The library's versions: the C ABI version (also the SONAME) and attnjit's release.
#include "attnjit/attnjit_c.h"

#ifndef ATTNJIT_VERSION_STRING
#error "capi/CMakeLists.txt defines ATTNJIT_VERSION_STRING from the project version"
#endif

extern "C" {

int32_t attnjit_api_version(void) { return ATTNJIT_C_API_VERSION; }

const char* attnjit_version_string(void) { return ATTNJIT_VERSION_STRING; }

}  // extern "C"
