// What the mask analysis says of one (query tile, key tile) box. Plain C++ with no
// includes: the kernels (Variant::classify, the KV cursor) and the host twin of the
// analysis (codegen/classify_box.h) use this one enum.
#pragma once

namespace attnjit {

enum class TileClass : int {
    kSkip = 0,     // no element is kept: the tile is never loaded
    kPartial = 1,  // some may be kept: the per-element mask runs
    kFull = 2,     // every element is kept: no mask code runs
};

// For messages and printing (host; -default-device makes it a device function too).
constexpr const char* tile_class_name(TileClass c) {
    return c == TileClass::kSkip ? "kSkip" : c == TileClass::kPartial ? "kPartial" : c == TileClass::kFull ? "kFull" : "?";
}

}  // namespace attnjit
