// The device templates (templates/attnjit/*), embedded at build time, handed to NVRTC
// as in-memory headers. templates_hash() is part of every kernel cache key.
#pragma once

#include <string>
#include <vector>

namespace attnjit::codegen {

struct EmbeddedFile {
    const char* name;  // include name, e.g. "attnjit/forward/kernel.cuh"
    const char* text;
};

const std::vector<EmbeddedFile>& embedded_templates();
const std::string& templates_hash();

}  // namespace attnjit::codegen
