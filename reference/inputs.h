// Input checks and captured-tensor reads shared by the fp64 references (forward and
// backward): what a reference reads, validated once, with messages that name the argument.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dsl/attention_spec.h"
#include "dsl/interpreter.h"
#include "reference/attention_reference.h"

namespace attnjit::reference {

// Dv is the output's head dim; with a latent projection K and V have head dim L instead of
// Dqk and Dv (L is 0 without one).
struct Dims {
    int64_t B = 0, Hq = 0, Nq = 0, Dqk = 0, Hkv = 0, Nk = 0, Dv = 0, L = 0;
};

// Validates the spec and the inputs (UserError starting with `who`) and returns the sizes.
Dims check_inputs(const dsl::AttentionSpec& spec, const ForwardInputs& in, const char* who);

// The sink logit of query head h (attention sinks), -inf without sinks (no sink).
double sink_logit(const dsl::AttentionSpec& spec, const ForwardInputs& in, int64_t h);

// Reads captured tensors for the interpreter, with bounds checks (broadcast: extent 1,
// stride 0, any index reads element 0).
struct CapturedReader {
    const std::map<std::string, HostTensor>* tensors;
    double operator()(const std::string& name, const long long* index, int rank) const;
    // The logical element `index` reads (broadcast dimensions give 0), bounds checked.
    void element(const std::string& name, const long long* index, int rank, int64_t* out) const;
};

// The interpreter's environment of one worker: the inputs' scalars, their captured
// tensors (bounds-checked reads) and the lengths; the indices are the caller's to set.
inline dsl::Env reference_env(const ForwardInputs& in, int64_t nq, int64_t nk) {
    dsl::Env env;
    env.scalars = in.scalars;
    env.load = CapturedReader{&in.tensors};
    env.q_len = nq;
    env.kv_len = nk;
    return env;
}

// One row's scores, env holding b, h, kv_head and q_idx: kept[j] = mask (true without one)
// and, for kept j, s[j] = scale * <q_i, k_j> and t[j] = score_mod(s[j]) (s[j] without one).
// qi: Dqk doubles; kb: the row's keys, Nk x Dqk. Vectors are resized to Nk.
void row_scores(const dsl::AttentionSpec& spec, dsl::Env& env, const double* qi, const double* kb, int64_t nk,
                int64_t dqk, std::vector<char>& kept, std::vector<double>& s, std::vector<double>& t);

// reference::forward's attention on operands already in double, without the output gate:
// q [B, Hq, Nq, D], k [B, Hkv, Nk, D], v [B, Hkv, Nk, Dv] (D and Dv: their own last
// dims). With a latent projection q is Q_lat and D = Dv = L (reference/latent.h); the
// backward recomputes it so.
ForwardResult attend(const dsl::AttentionSpec& spec, const ForwardInputs& in, const DoubleTensor& q,
                     const DoubleTensor& k, const DoubleTensor& v, int threads);

}  // namespace attnjit::reference
