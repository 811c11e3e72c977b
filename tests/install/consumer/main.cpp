// Builds a spec through the installed headers and compiles it for sm_80 (NVRTC only, no
// GPU needed). Exit 0 and "consumer ok" on success.
#include <attnjit/attnjit.h>

#include <iostream>

int main() {
    using namespace attnjit;
    using namespace attnjit::dsl;
    auto spec = AttentionSpec().dtype(DType::bf16).head_dim(64).score_mod(mods::softcap(30.0)).mask(mods::causal());
    std::cout << spec << "\n";
    try {
        CompileOptions options;
        options.arch = "sm_80";
        Attention attn(spec, options);
        std::cout << "compiled " << attn.source().name << " for " << attn.arch() << "\n";
    } catch (const EnvironmentError& e) {  // no NVRTC on this machine: linking is what we test
        std::cout << "NVRTC unavailable: " << e.what() << "\n";
    }
    std::cout << "consumer ok\n";
    return 0;
}
