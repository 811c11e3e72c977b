// The output gate of the fp64 reference (SEMANTICS.md section 5): out = sigmoid(g) * O,
// elementwise, with g [B, Hq, Nq, Dv] read as captured tensors are (a dimension of extent 1
// and stride 0 broadcasts, and its gradient sums over it).
#pragma once

#include <cstdint>

#include "reference/attention_reference.h"
#include "reference/host_tensor.h"

namespace attnjit::reference {

// UserError (starting with `who`) unless g is [B, Hq, Nq, Dv] with, in each dimension, the
// output's extent or extent 1 and stride 0 (broadcast).
void check_gate_shape(const char* who, const std::string& name, const HostTensor& g, int64_t B, int64_t Hq,
                      int64_t Nq, int64_t Dv);

// sigmoid(g) at output element (b, h, i, d).
double gate_factor(const HostTensor& g, int64_t b, int64_t h, int64_t i, int64_t d);

// The gate's backward, given O (ungated, [B, Hq, Nq, Dv]) and dOut (the gated output's
// gradient, same shape): d_o becomes dO of the ungated output, dOut * sigmoid(g), and the
// result is d g = dOut * O * sigmoid(g) (1 - sigmoid(g)) in g's logical shape (summed over
// broadcast dimensions).
DoubleTensor gate_backward(const HostTensor& g, const DoubleTensor& o, DoubleTensor& d_o);

}  // namespace attnjit::reference
