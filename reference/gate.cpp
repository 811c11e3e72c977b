#include "reference/gate.h"

#include <cmath>

#include "support/error.h"

namespace attnjit::reference {
namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

bool broadcasts(const HostTensor& g, int d) { return g.size(d) == 1 && g.strides()[d] == 0; }

// The element of g that output element (b, h, i, d) reads.
void gate_index(const HostTensor& g, int64_t b, int64_t h, int64_t i, int64_t d, int64_t* idx) {
    const int64_t at[4] = {b, h, i, d};
    for (int k = 0; k < 4; ++k) idx[k] = broadcasts(g, k) ? 0 : at[k];
}

}  // namespace

void check_gate_shape(const char* who, const std::string& name, const HostTensor& g, int64_t B, int64_t Hq,
                      int64_t Nq, int64_t Dv) {
    const int64_t want[4] = {B, Hq, Nq, Dv};
    bool ok = g.rank() == 4;
    for (int d = 0; ok && d < 4; ++d) ok = g.size(d) == want[d] || broadcasts(g, d);
    user_check(ok) << who << ": the gate tensor '" << name << "' is " << g.describe()
                   << "; it must be shaped like the output, [B, Hq, Nq, Dv] = [" << B << ", " << Hq << ", " << Nq
                   << ", " << Dv << "] (a dimension of extent 1 and stride 0 broadcasts)";
}

double gate_factor(const HostTensor& g, int64_t b, int64_t h, int64_t i, int64_t d) {
    int64_t idx[4];
    gate_index(g, b, h, i, d, idx);
    return sigmoid(g.get(idx));
}

DoubleTensor gate_backward(const HostTensor& g, const DoubleTensor& o, DoubleTensor& d_o) {
    internal_check(o.shape == d_o.shape && o.shape.size() == 4) << "gate_backward: O and dO differ";
    DoubleTensor dg(g.shape());
    const int64_t Hq = o.shape[1], Nq = o.shape[2], Dv = o.shape[3];
    for (int64_t n = 0; n < o.numel(); ++n) {
        const int64_t d = n % Dv, i = (n / Dv) % Nq, h = (n / (Dv * Nq)) % Hq, b = n / (Dv * Nq * Hq);
        int64_t idx[4];
        gate_index(g, b, h, i, d, idx);
        const double sg = sigmoid(g.get(idx));
        dg.data[static_cast<size_t>(dg.offset_of(idx))] += d_o.data[static_cast<size_t>(n)] *
                                                            o.data[static_cast<size_t>(n)] * sg * (1 - sg);
        d_o.data[static_cast<size_t>(n)] *= sg;
    }
    return dg;
}

}  // namespace attnjit::reference
