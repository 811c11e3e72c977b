#include "tests/gpu/score_conv_cases.h"

#include <sstream>

#include "dsl/dsl.h"
#include "dsl/mods.h"

namespace attnjit::gputest {

std::string ConvCase::name() const {
    std::ostringstream s;
    s << dtype_name(dtype) << "_d" << d;
    if (d_v > 0) s << "x" << d_v;
    s << "_c" << cq << "x" << ck << "_b" << batch << "_h" << hq << "x" << hkv
      << "_q" << nq << "_k" << nk << (softcap ? "_softcap" : "") << (gate ? "_gate" : "") << (sinks ? "_sinks" : "")
      << (mask == ConvMask::document ? "_documents" : mask == ConvMask::window ? "_window" : "")
      << (mask == ConvMask::scatter ? "_scatter" : "");
    return s.str();
}

uint64_t ConvCase::seed() const {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (unsigned char ch : name()) h = (h ^ ch) * 0x100000001b3ULL;
    return h;
}

std::vector<ConvCase> shared_conv_cases() {
    std::vector<ConvCase> cases;
    auto add = [&](ConvCase c) { cases.push_back(c); };
    for (auto [cq, ck] : {std::pair{1, 1}, {3, 3}, {6, 11}, {8, 15}}) {
        add({DType::bf16, 128, cq, ck, 2, 4, 2, 300, 300});
        add({DType::f16, 64, cq, ck, 1, 4, 4, 129, 129});
    }
    add({DType::bf16, 128, 6, 11, 1, 2, 1, 17, 17});
    add({DType::f16, 128, 6, 11, 1, 2, 2, 100, 300});   // Nq < Nk: keys no query reaches (top-left causal)
    add({DType::bf16, 128, 6, 11, 1, 2, 2, 300, 100});  // Nq > Nk
    ConvCase softcap{DType::bf16, 128, 6, 11, 1, 4, 2, 200, 200};
    softcap.softcap = true;
    add(softcap);
    ConvCase gated{DType::bf16, 64, 3, 5, 2, 4, 4, 150, 150};
    gated.gate = gated.sinks = true;
    add(gated);
    return cases;
}

std::vector<ConvCase> masked_conv_cases() {
    std::vector<ConvCase> cases;
    auto add = [&](ConvCase c, ConvMask m) {
        c.mask = m;
        cases.push_back(c);
    };
    for (auto [cq, ck] : {std::pair{1, 1}, {3, 3}, {6, 11}, {8, 15}}) {
        add({DType::bf16, 128, cq, ck, 2, 4, 2, 300, 300}, ConvMask::document);
        add({DType::f16, 64, cq, ck, 1, 2, 2, 333, 333}, ConvMask::scatter);
    }
    add({DType::bf16, 64, 6, 11, 1, 2, 1, 1000, 1000}, ConvMask::document);  // long documents too
    add({DType::bf16, 32, 6, 11, 1, 2, 2, 200, 200}, ConvMask::document);    // padded head dim, 64 x 64 tile
    add({DType::f16, 128, 6, 11, 1, 2, 2, 400, 400}, ConvMask::window);
    ConvCase gated{DType::bf16, 64, 3, 5, 2, 4, 4, 150, 150};
    gated.softcap = gated.gate = gated.sinks = true;
    add(gated, ConvMask::document);
    return cases;
}

dsl::AttentionSpec conv_spec(const ConvCase& c) {
    dsl::AttentionSpec s;
    s.dtype(c.dtype).head_dims(c.d, c.dv()).return_lse().score_conv("theta", c.cq, c.ck);
    using dsl::kv_idx;
    using dsl::q_idx;
    switch (c.mask) {
        case ConvMask::none: break;
        case ConvMask::document: s.mask(dsl::mods::document_mask(dsl::Tensor("doc_ids", DType::i32, 2))); break;
        case ConvMask::window: s.mask(q_idx() - kv_idx() < dsl::Expr(77)); break;
        case ConvMask::scatter: s.mask((dsl::Expr(7) * q_idx() + dsl::Expr(3) * kv_idx()) % dsl::Expr(11) != dsl::Expr(0)); break;
    }
    if (c.softcap) s.score_mod(dsl::mods::softcap(dsl::scalar("cap")));
    if (c.gate) s.gate("gate");
    if (c.sinks) s.sinks("sinks");
    return s;
}

reference::ForwardInputs conv_inputs(const ConvCase& c) {
    const uint64_t seed = c.seed();
    reference::ForwardInputs in{HostTensor(c.dtype, {c.batch, c.hq, c.nq, c.d}),
                                HostTensor(c.dtype, {c.batch, c.hkv, c.nk, c.d}),
                                HostTensor(c.dtype, {c.batch, c.hkv, c.nk, c.dv()}), {}, {}};
    reference::fill_normal(in.q, seed + 1);
    reference::fill_normal(in.k, seed + 2);
    reference::fill_normal(in.v, seed + 3);
    HostTensor theta(DType::f32, {c.hq, c.cq, c.ck});
    reference::fill_normal(theta, seed + 4, 0.0, 0.3);
    for (int64_t h = 0; h < c.hq; ++h)
        theta.set({h, c.cq - 1, (c.ck - 1) / 2}, theta.get({h, c.cq - 1, (c.ck - 1) / 2}) + 1.0);
    in.tensors.emplace("theta", std::move(theta));
    if (c.softcap) in.scalars["cap"] = 3.0;
    if (c.gate) {
        HostTensor g(c.dtype, {c.batch, c.hq, c.nq, c.dv()});
        reference::fill_normal(g, seed + 5);
        in.tensors.emplace("gate", std::move(g));
    }
    if (c.mask == ConvMask::document) {
        // Documents of 1 to 160 rows (lengths from the seed): boundaries inside tiles and
        // halos, one-row documents, and documents longer than a tile.
        HostTensor ids(DType::i32, {c.batch, c.nk});
        uint64_t x = seed + 7;
        for (int64_t b = 0; b < c.batch; ++b) {
            int64_t doc = 0, left = 0;
            for (int64_t j = 0; j < c.nk; ++j) {
                if (left == 0) {
                    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                    const uint64_t r = x >> 33;
                    left = r % 4 == 0 ? 1 + static_cast<int64_t>(r % 7) : 20 + static_cast<int64_t>(r % 141);
                    ++doc;
                }
                ids.set({b, j}, static_cast<double>(doc));
                --left;
            }
        }
        in.tensors.emplace("doc_ids", std::move(ids));
    }
    if (c.sinks) {
        HostTensor s(DType::f32, {c.hq});
        reference::fill_normal(s, seed + 6, 2.0, 1.0);
        in.tensors.emplace("sinks", std::move(s));
    }
    return in;
}

ConvDeviceArgs to_device_args(const reference::ForwardInputs& in, const HostTensor& o, const HostTensor& lse) {
    ConvDeviceArgs d{runtime::to_device(in.q), runtime::to_device(in.k), runtime::to_device(in.v),
                     runtime::to_device(o), runtime::to_device(lse), {}, {}};
    LaunchArgs& a = d.args;
    a.q = d.q.view;
    a.k = d.k.view;
    a.v = d.v.view;
    a.o = d.o.view;
    a.lse = d.lse.view;
    for (const auto& [name, t] : in.tensors) a.tensors[name] = d.tensors.emplace(name, runtime::to_device(t)).first->second.view;
    a.scalars = in.scalars;
    return d;
}

ConvRun run_on_gpu(const dsl::AttentionSpec& spec, const reference::ForwardInputs& in,
                   const std::optional<TileConfig>& tile) {
    const auto& q = in.q.shape();
    ConvRun r{HostTensor(in.q.dtype(), {q[0], q[1], q[2], spec.head_dim_v()}), HostTensor(DType::f32, {q[0], q[1], q[2]})};
    reference::fill_poison(r.o);
    reference::fill_poison(r.lse);
    const ConvDeviceArgs d = to_device_args(in, r.o, r.lse);
    CompileOptions opts;
    opts.tile = tile;
    Attention attn(spec, opts);
    attn(d.args);
    runtime::synchronize("cuCtxSynchronize after the forward");
    runtime::from_device(d.o, r.o);
    runtime::from_device(d.lse, r.lse);
    return r;
}

void set_identity_kernel(reference::ForwardInputs& in, const ConvCase& c) {
    HostTensor& theta = in.tensors.at("theta");
    for (int64_t h = 0; h < c.hq; ++h)
        for (int a = 0; a < c.cq; ++a)
            for (int b = 0; b < c.ck; ++b) theta.set({h, a, b}, a == c.cq - 1 && b == (c.ck - 1) / 2 ? 1.0 : 0.0);
}

}  // namespace attnjit::gputest
