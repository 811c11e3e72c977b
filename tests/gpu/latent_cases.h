// The latent projection's GPU test cases (MLA, SEMANTICS.md section 4), shared by the forward
// (latent_test.cpp) and backward (latent_backward_test.cpp) suites: the case, its spec and
// its inputs (N(0, 1) Q and latent K, V; projections scaled by 1/sqrt(fan-in)).
#pragma once

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "api/attention.h"
#include "dsl/attention_spec.h"
#include "reference/attention_reference.h"
#include "tests/gpu/gpu_test_support.h"

namespace attnjit::gputest {

struct LatentCase {
    LatentCase(DType dt, int d_, int dv_, int l_, bool c, int b = 1, int h = 4, int nq_ = 333, int nk_ = 333)
        : dtype(dt), d(d_), dv(dv_), l(l_), causal(c), batch(b), hq(h), nq(nq_), nk(nk_) {}
    DType dtype;
    int d, dv, l;
    bool causal;
    int batch, hq, nq, nk;
    bool softcap = false, window = false, gate = false, sinks = false;
    int band = -1;  // >= 0: a reciprocal band of this width (RA + MLA; its form follows `causal`)
    std::optional<TileConfig> tile;

    std::string name() const {
        std::ostringstream s;
        s << dtype_name(dtype) << "_d" << d << "x" << dv << "_L" << l << (causal ? "_causal" : "_full") << "_b"
          << batch << "_h" << hq << "_n" << nq << "x" << nk << (softcap ? "_softcap" : "") << (window ? "_window" : "")
          << (gate ? "_gate" : "") << (sinks ? "_sinks" : "");
        if (band >= 0) s << "_band" << band;
        if (tile) s << "_m" << tile->block_m << "n" << tile->block_n << "w" << tile->warps << "s" << tile->stages;
        return s.str();
    }
    uint64_t seed() const { return 7919u * d + 131u * l + 17u * nq + 5u * nk + 3u * hq + (causal ? 1 : 2); }
};

dsl::AttentionSpec latent_spec(const LatentCase& c);
// N(0, 1) Q and latent K, V; the projections N(0, 1/sqrt(fan-in)), so Q_lat and O have unit scale.
reference::ForwardInputs latent_inputs(const LatentCase& c);

}  // namespace attnjit::gputest
