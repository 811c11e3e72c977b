// Host-side bounds of captured-tensor reads over a whole launch, so that no argument
// that passes check_launch_args can make a kernel read outside a tensor.
//
// Every int index expression gets a range over all (b, h, i, j) of the launch, refined
// along the path that reaches the load: inside select(c, x, y), && and ||, a comparison
// of a variable with a bound narrows that variable (select(i < 16, t[i], 0.0) reads t
// only for i < 16; in score_mod only, see Guards). An index computed from another tensor's elements or from a float has
// no host-side bound unless the expression bounds it itself (clamp(doc[b, j], 0, 9)).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "dsl/ir.h"
#include "runtime/tensor_view.h"

namespace attnjit::runtime {

struct LaunchExtents {
    int64_t batch, q_heads, kv_heads, q_len, kv_len;
};

// Where guards narrow the bounds: in a score_mod, reads happen only on their path; a
// mask's reads are also evaluated over whole tiles by the generated classify(), which
// ignores guards, so there every read must be in bounds over the whole launch.
enum class Guards { Narrow, Ignore };

// Throws UserError naming the tensor, the index, its range and the fix when a read of
// `expr` could leave a tensor of `tensors` (dimensions of stride 0 broadcast and are
// never out of bounds), or when index arithmetic could overflow int32.
void check_tensor_reads(const dsl::Expr& expr, Guards guards, const LaunchExtents& extents,
                        const std::map<std::string, double>& scalars,
                        const std::map<std::string, TensorView>& tensors);

}  // namespace attnjit::runtime
