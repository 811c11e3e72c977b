// The Variant contract: what generated code provides to every kernel (templates/README.md
// lists the hooks). Generated Variants derive from VariantDefaults, which declares the
// structural hooks a plain pointwise variant leaves off; check_variant<V>() states the
// rest of the contract with English messages.
#pragma once

namespace attnjit {

struct VariantDefaults {
    static constexpr bool kHasScoreMod = false;
    static constexpr bool kHasMask = false;
    static constexpr bool kCanClassify = false;
    static constexpr bool kClassifyReadsMemory = false;
};

}  // namespace attnjit
