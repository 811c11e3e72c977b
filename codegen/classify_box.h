// classify_box: the host-side twin of the emitted Variant::classify. It runs the same
// interval rules (interval_rules.h) with numbers instead of code, so tests can check
// the analysis against brute force without a GPU.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "attnjit/common/tile_class.h"
#include "codegen/binding.h"

namespace attnjit {
inline std::ostream& operator<<(std::ostream& os, TileClass c) { return os << tile_class_name(c); }
}  // namespace attnjit

namespace attnjit::codegen {

struct KernelPlan;

// The box q in [q0, q1], k in [k0, k1], inclusive, non-empty, inside [0, Nq) x [0, Nk).
struct Box {
    int q0, q1, k0, k1;
};

// A captured tensor on the host: elements as doubles (ints are exact below 2^53),
// addressed through element strides like the device's TensorArg. Int elements are read
// as int32 (an i64 value truncated like a C cast), as the device and dsl::interpret do.
struct HostTensor {
    std::vector<double> data;
    std::vector<long long> strides;
};

// Everything a head-level value may read.
struct HostEnv {
    int b = 0, h = 0, kv_head = 0;
    int q_len = 0, kv_len = 0;
    std::map<std::string, double> scalars;
    std::map<std::string, HostTensor> tensors;
};

// Classifies `mask` (which may read `bindings` through Temps) over the box.
TileClass classify_box(const dsl::Expr& mask, const Box& box, const HostEnv& env, const Bindings& bindings = {});
// Classifies the plan's mask exactly as its generated classify() does (kFull without a
// mask; kPartial when the plan cannot classify).
TileClass classify_box(const KernelPlan& plan, const Box& box, const HostEnv& env);

}  // namespace attnjit::codegen
