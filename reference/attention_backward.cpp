#include "reference/attention_backward.h"

#include <cmath>
#include <limits>

#include "codegen/autodiff.h"
#include "dsl/interpreter.h"
#include "reference/inputs.h"
#include "reference/parallel.h"
#include "reference/score_conv.h"
#include "support/error.h"

namespace attnjit::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One worker's share of the captured-tensor and scalar gradients (reads cross rows).
struct Partials {
    std::map<std::string, DoubleTensor> dtensors;
    std::map<std::string, double> dscalars;
};

}  // namespace

BackwardResult backward(const dsl::AttentionSpec& spec, const ForwardInputs& in, const HostTensor& d_o,
                        const std::set<std::string>& wanted, int threads) {
    const Dims x = check_inputs(spec, in, "reference::backward");
    const int64_t B = x.B, Hq = x.Hq, Nq = x.Nq, Dqk = x.Dqk, Hkv = x.Hkv, Nk = x.Nk, Dv = x.Dv;
    user_check(d_o.rank() == 4 && d_o.size(0) == B && d_o.size(1) == Hq && d_o.size(2) == Nq && d_o.size(3) == Dv)
        << "reference::backward: d_o is " << d_o.describe() << "; it must be [B, Hq, Nq, Dv] = [" << B << ", " << Hq
        << ", " << Nq << ", " << Dv << "] like the output";
    user_check(d_o.dtype() == spec.dtype()) << "reference::backward: d_o has dtype " << dtype_name(d_o.dtype())
                                            << " but the spec's dtype is " << dtype_name(spec.dtype());
    const codegen::ScoreModGradients grads = codegen::score_mod_gradients(spec, wanted);

    BackwardResult out;
    out.forward = forward(spec, in, threads);
    // An output gate: the backward runs on the ungated O with dO * sigmoid(gate), and
    // d gate = dOut * O * sigmoid(gate) (1 - sigmoid(gate)) (SEMANTICS.md section 5).
    const HostTensor* gate = spec.has_gate() ? &in.tensors.at(spec.gate_name()) : nullptr;
    const bool want_gate = gate != nullptr && wanted.count(spec.gate_name()) > 0;
    ForwardResult ungated_result;
    if (gate != nullptr) {
        ForwardInputs plain = in;
        plain.tensors.erase(spec.gate_name());
        ungated_result = forward(dsl::AttentionSpec(spec).no_gate(), plain, threads);
    }
    const ForwardResult& ungated = gate != nullptr ? ungated_result : out.forward;
    if (spec.has_score_conv()) {
        // Its own pass (the taps read across rows): dO of the ungated output, d gate here.
        for (const auto& name : wanted)
            user_check(name == spec.score_conv_name() || (gate != nullptr && name == spec.gate_name()))
                << "reference::backward: with a score convolution, the gradients of '" << name
                << "' are not implemented (only q, k, v, the convolution's kernel and the gate)";
        DoubleTensor dout = to_double(d_o);
        if (gate != nullptr) {
            DoubleTensor dg(gate->shape());
            for (int64_t n = 0; n < dout.numel(); ++n) {
                const int64_t d = n % Dv, i = (n / Dv) % Nq, h = (n / (Dv * Nq)) % Hq, b = n / (Dv * Nq * Hq);
                const double sg = sigmoid(gate->get({b, h, i, d}));
                dg.data[static_cast<size_t>(n)] = dout.data[static_cast<size_t>(n)] *
                                                  ungated.o.data[static_cast<size_t>(n)] * sg * (1 - sg);
                dout.data[static_cast<size_t>(n)] *= sg;
            }
            if (want_gate) out.dtensors[spec.gate_name()] = std::move(dg);
        }
        conv_backward(spec, in, ungated, dout, wanted.count(spec.score_conv_name()) > 0, out);
        return out;
    }
    out.delta = DoubleTensor({B, Hq, Nq});
    out.dq = DoubleTensor({B, Hq, Nq, Dqk});
    out.dk = DoubleTensor({B, Hkv, Nk, Dqk});
    out.dv = DoubleTensor({B, Hkv, Nk, Dv});
    const DoubleTensor q = to_double(in.q), k = to_double(in.k), v = to_double(in.v), dout = to_double(d_o);
    const double scale = spec.scale_or_default();
    const int64_t group = Hq / Hkv;
    const CapturedReader reader{&in.tensors};
    // Attention sinks: d sink_h = -sum_{b, i} exp(sink_h - LSE_i) Delta_i, when asked for.
    const bool want_sinks = spec.has_sinks() && wanted.count(spec.sinks_name()) > 0;

    Partials zero;
    for (const auto& name : wanted) {
        auto t = in.tensors.find(name);
        if (t != in.tensors.end()) zero.dtensors.emplace(name, DoubleTensor(t->second.shape()));
        else zero.dscalars[name] = 0.0;
    }

    // Workers own whole (b, kv head) groups: dK and dV of a group, dQ of its rows.
    const int64_t groups = B * Hkv;
    const int workers = worker_count(groups, threads, 1);
    std::vector<Partials> partials(static_cast<size_t>(workers), zero);
    parallel_ranges(groups, workers, [&](int worker, int64_t begin, int64_t end) {
        Partials& mine = partials[static_cast<size_t>(worker)];
        dsl::Env env;
        env.scalars = in.scalars;
        env.load = reader;
        env.q_len = Nq;
        env.kv_len = Nk;
        std::vector<double> s, t;
        std::vector<char> kept;
        std::vector<double> dov(static_cast<size_t>(Dv));
        for (int64_t g = begin; g < end; ++g) {
            const int64_t b = g / Hkv, kvh = g % Hkv;
            const double* kb = &k.data[static_cast<size_t>(g * Nk * Dqk)];
            const double* vb = &v.data[static_cast<size_t>(g * Nk * Dv)];
            double* dkb = &out.dk.data[static_cast<size_t>(g * Nk * Dqk)];
            double* dvb = &out.dv.data[static_cast<size_t>(g * Nk * Dv)];
            for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h)
                for (int64_t i = 0; i < Nq; ++i) {
                    const int64_t row = (b * Hq + h) * Nq + i;
                    env.b = b;
                    env.h = h;
                    env.kv_head = kvh;
                    env.q_idx = i;
                    const double* qi = &q.data[static_cast<size_t>(row * Dqk)];
                    const double* oi = &ungated.o.data[static_cast<size_t>(row * Dv)];
                    const double* doi = &dout.data[static_cast<size_t>(row * Dv)];
                    if (gate != nullptr) {  // doi becomes dO of the ungated output
                        for (int64_t d = 0; d < Dv; ++d) {
                            const double sg = sigmoid(gate->get({b, h, i, d}));
                            if (want_gate)
                                mine.dtensors.at(spec.gate_name()).at({b, h, i, d}) += doi[d] * oi[d] * sg * (1 - sg);
                            dov[static_cast<size_t>(d)] = doi[d] * sg;
                        }
                        doi = dov.data();
                    }
                    double* dqi = &out.dq.data[static_cast<size_t>(row * Dqk)];
                    const double lse = out.forward.lse.data[static_cast<size_t>(row)];
                    double delta = 0;
                    for (int64_t d = 0; d < Dv; ++d) delta += doi[d] * oi[d];
                    out.delta.data[static_cast<size_t>(row)] = delta;
                    if (want_sinks) {
                        const double sink = sink_logit(spec, in, h);
                        if (sink != -kInf)  // a -inf sink is no sink: no gradient
                            mine.dtensors.at(spec.sinks_name()).data[static_cast<size_t>(h)] -=
                                std::exp(sink - lse) * delta;
                    }
                    if (lse == -kInf) continue;  // no kept key: zero gradients
                    row_scores(spec, env, qi, kb, Nk, Dqk, kept, s, t);
                    for (int64_t j = 0; j < Nk; ++j) {
                        if (!kept[j] || t[j] == -kInf) continue;
                        env.kv_idx = j;
                        env.score = s[j];
                        const double p = std::exp(t[j] - lse);
                        const double* vj = vb + j * Dv;
                        double dp = 0;
                        for (int64_t d = 0; d < Dv; ++d) dp += doi[d] * vj[d];
                        const double dt = p * (dp - delta);
                        const double ds = dt * dsl::interpret_float(grads.d_score, env);
                        double* dvj = dvb + j * Dv;
                        for (int64_t d = 0; d < Dv; ++d) dvj[d] += p * doi[d];
                        const double* kj = kb + j * Dqk;
                        double* dkj = dkb + j * Dqk;
                        for (int64_t d = 0; d < Dqk; ++d) {
                            dqi[d] += scale * ds * kj[d];
                            dkj[d] += scale * ds * qi[d];
                        }
                        for (const auto& site : grads.tensors) {
                            const auto& load = *site.read.as<dsl::TensorLoad>();
                            internal_check(load.indices.size() <= 8) << "reference::backward: rank over 8";
                            long long index[8];
                            for (size_t r = 0; r < load.indices.size(); ++r)
                                index[r] = dsl::interpret_int(load.indices[r], env);
                            int64_t element[8];
                            const int rank = static_cast<int>(load.indices.size());
                            reader.element(site.tensor, index, rank, element);
                            DoubleTensor& dtensor = mine.dtensors.at(site.tensor);
                            dtensor.data[static_cast<size_t>(dtensor.offset_of(element))] +=
                                dt * dsl::interpret_float(site.partial, env);
                        }
                        for (const auto& sc : grads.scalars)
                            mine.dscalars.at(sc.scalar) += dt * dsl::interpret_float(sc.partial, env);
                    }
                }
        }
    });

    // Fixed order: worker 0 first.
    out.dtensors = std::move(partials[0].dtensors);
    out.dscalars = std::move(partials[0].dscalars);
    for (size_t w = 1; w < partials.size(); ++w) {
        for (auto& [name, part] : partials[w].dtensors) {
            auto& total = out.dtensors.at(name).data;
            for (size_t n = 0; n < total.size(); ++n) total[n] += part.data[n];
        }
        for (const auto& [name, value] : partials[w].dscalars) out.dscalars.at(name) += value;
    }
    return out;
}

}  // namespace attnjit::reference
