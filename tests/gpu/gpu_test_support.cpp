#include "tests/gpu/gpu_test_support.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <sstream>

#include "dsl/dsl.h"

namespace attnjit::gputest {

const char* mod_name(Mod m) {
    switch (m) {
    case Mod::Plain: return "plain";
    case Mod::CausalTopLeft: return "causal_tl";
    case Mod::CausalBottomRight: return "causal_br";
    case Mod::SlidingWindow: return "window";
    case Mod::AlibiCausal: return "alibi_causal";
    case Mod::Softcap: return "softcap";
    case Mod::BiasBroadcast: return "bias_bcast";
    case Mod::BiasPadded: return "bias_padded";
    case Mod::RelativePosition: return "relpos";
    case Mod::DocumentMask: return "document";
    case Mod::PrefixLm: return "prefix_lm";
    case Mod::Combination: return "softcap_relpos_causal_doc";
    }
    return "?";
}

std::vector<Mod> all_mods() {
    return {Mod::Plain,        Mod::CausalTopLeft, Mod::CausalBottomRight, Mod::SlidingWindow,
            Mod::AlibiCausal,  Mod::Softcap,       Mod::BiasBroadcast,     Mod::BiasPadded,
            Mod::RelativePosition, Mod::DocumentMask, Mod::PrefixLm,  Mod::Combination};
}

std::string Case::name() const {
    std::ostringstream s;
    s << dtype_name(dtype) << "_d" << dqk;
    if (dv != dqk) s << "x" << dv;
    s << "_" << mod_name(mod) << "_b" << batch << "_h" << hq << "x" << hkv << "_q" << nq << "_k" << nk;
    if (layout == Layout::BNHD) s << "_bnhd";
    if (!lse) s << "_nolse";
    if (sinks) s << "_sinks" << (*sinks == DType::f32 ? "" : dtype_name(*sinks));
    if (gate) s << "_gate";
    if (mainloop) s << "_" << mainloop_kind_name(*mainloop);
    return s.str();
}

std::vector<Case> on_sm80_loop(const std::vector<Case>& cases) {
    std::vector<Case> out;
    for (Case c : cases)
        if (c.dtype != DType::f32 && sm90_head_dims(c.dqk, c.dv)) {
            c.mainloop = MainloopKind::sm80;
            out.push_back(c);
        }
    return out;
}

uint64_t Case::seed() const {
    uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
    for (unsigned char ch : name()) h = (h ^ ch) * 0x100000001b3ULL;
    return h;
}

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name(); }

namespace {

constexpr int kRelMaxDistance = 32;       // RelativePosition's table: [Hq, 65]
constexpr int kComboRelMaxDistance = 16;  // Combination's table: [Hq, 33]
constexpr double kCap = 2.0;              // small enough to bite on N(0, 1) scores
constexpr int kWindow = 97;               // not a multiple of any tile
constexpr int kPrefix = 37;

dsl::Tensor slopes_tensor() { return dsl::Tensor("slopes", DType::f32, 1); }
dsl::Tensor rel_tensor() { return dsl::Tensor("rel_table", DType::f32, 2); }
dsl::Tensor q_doc_tensor() { return dsl::Tensor("q_doc", DType::i32, 2); }
dsl::Tensor kv_doc_tensor() { return dsl::Tensor("kv_doc", DType::i32, 2); }

// Strides of a logical [B, H, N, D] tensor stored in `layout`'s memory order.
std::vector<int64_t> layout_strides(Layout layout, int64_t B, int64_t H, int64_t N, int64_t D) {
    (void)B;
    if (layout == Layout::BNHD) return {N * H * D, D, H * D, 1};
    return {H * N * D, N * D, D, 1};
}

// Documents as contiguous runs, with the same (random) boundaries at the same relative
// positions of the queries and of the keys, so both sides see every document (except
// where a run is shorter than one position: those queries keep no key).
void fill_documents(HostTensor& q_doc, HostTensor& kv_doc, uint64_t seed) {
    const int64_t B = q_doc.size(0), Nq = q_doc.size(1), Nk = kv_doc.size(1);
    for (int64_t b = 0; b < B; ++b) {
        HostTensor cuts(DType::f32, {5});
        reference::fill_normal(cuts, seed + 17 * static_cast<uint64_t>(b) + 1);
        std::vector<double> c;
        for (int k = 0; k < 5; ++k) c.push_back(0.5 + 0.25 * std::tanh(cuts.get({k})) * 2);  // in (0, 1)
        std::sort(c.begin(), c.end());
        auto doc_of = [&](double pos) {
            int d = 0;
            for (double x : c) d += pos >= x;
            return d;
        };
        for (int64_t i = 0; i < Nq; ++i) q_doc.set({b, i}, doc_of((i + 0.5) / Nq));
        for (int64_t j = 0; j < Nk; ++j) kv_doc.set({b, j}, doc_of((j + 0.5) / Nk));
    }
}

std::string index_str(const std::vector<int64_t>& idx) {
    std::ostringstream s;
    s << "[";
    for (size_t d = 0; d < idx.size(); ++d) s << (d ? ", " : "") << idx[d];
    return s.str() + "]";
}

}  // namespace

dsl::AttentionSpec make_spec(const Case& c) {
    namespace m = dsl::mods;
    using m::CausalAlign;
    dsl::AttentionSpec s;
    s.dtype(c.dtype).head_dims(c.dqk, c.dv).return_lse(c.lse);
    switch (c.mod) {
    case Mod::Plain: break;
    case Mod::CausalTopLeft: s.mask(m::causal(CausalAlign::TopLeft)); break;
    case Mod::CausalBottomRight: s.mask(m::causal(CausalAlign::BottomRight)); break;
    case Mod::SlidingWindow:
        s.mask(m::sliding_window(dsl::int_scalar("window"), CausalAlign::BottomRight));
        break;
    case Mod::AlibiCausal: s.score_mod(m::alibi(slopes_tensor())).mask(m::causal()); break;
    case Mod::Softcap: s.score_mod(m::softcap(dsl::scalar("cap"))); break;
    case Mod::BiasBroadcast:
    case Mod::BiasPadded: s.score_mod(m::bias(dsl::Tensor("bias", c.dtype, 4))); break;
    case Mod::RelativePosition:
        s.score_mod(m::relative_position_bias(rel_tensor(), kRelMaxDistance));
        break;
    case Mod::DocumentMask: s.mask(m::document_mask(q_doc_tensor(), kv_doc_tensor())); break;
    case Mod::PrefixLm: s.mask(m::prefix_lm(dsl::int_scalar("prefix"))); break;
    case Mod::Combination:
        s.score_mod(m::compose(m::softcap(dsl::scalar("cap")),
                               m::relative_position_bias(rel_tensor(), kComboRelMaxDistance)))
            .mask(m::causal(CausalAlign::BottomRight) &&
                  m::document_mask(q_doc_tensor(), kv_doc_tensor()));
        break;
    }
    if (c.sinks) s.sinks("sinks", *c.sinks);
    if (c.gate) s.gate("gate");
    return s;
}

Problem make_problem(const Case& c, bool upload) {
    Problem p;
    p.c = c;
    p.spec = make_spec(c);
    const int64_t B = c.batch, Hq = c.hq, Hkv = c.hkv, Nq = c.nq, Nk = c.nk;
    const uint64_t seed = c.seed();
    auto& in = p.in;
    in.q = HostTensor(c.dtype, {B, Hq, Nq, c.dqk}, layout_strides(c.layout, B, Hq, Nq, c.dqk));
    in.k = HostTensor(c.dtype, {B, Hkv, Nk, c.dqk}, layout_strides(c.layout, B, Hkv, Nk, c.dqk));
    in.v = HostTensor(c.dtype, {B, Hkv, Nk, c.dv}, layout_strides(c.layout, B, Hkv, Nk, c.dv));
    reference::fill_normal(in.q, seed + 1);
    reference::fill_normal(in.k, seed + 2);
    reference::fill_normal(in.v, seed + 3);

    auto add_docs = [&] {
        HostTensor q_doc(DType::i32, {B, Nq}), kv_doc(DType::i32, {B, Nk});
        fill_documents(q_doc, kv_doc, seed + 4);
        in.tensors.emplace("q_doc", std::move(q_doc));
        in.tensors.emplace("kv_doc", std::move(kv_doc));
    };
    auto add_rel = [&](int max_distance) {
        HostTensor rel(DType::f32, {Hq, 2 * max_distance + 1});
        reference::fill_normal(rel, seed + 5);
        in.tensors.emplace("rel_table", std::move(rel));
    };
    switch (c.mod) {
    case Mod::SlidingWindow: in.scalars["window"] = kWindow; break;
    case Mod::AlibiCausal: {
        HostTensor slopes(DType::f32, {Hq});
        for (int64_t h = 0; h < Hq; ++h)
            slopes.set({h}, std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(Hq)));
        in.tensors.emplace("slopes", std::move(slopes));
        break;
    }
    case Mod::Softcap: in.scalars["cap"] = kCap; break;
    case Mod::BiasBroadcast: {
        // One [1, Hq, Nq, Nk] bias seen as [B, Hq, Nq, Nk] through a batch stride of 0.
        HostTensor bias(c.dtype, {B, Hq, Nq, Nk}, {0, Nq * Nk, Nk, 1});
        reference::fill_normal(bias, seed + 6);
        in.tensors.emplace("bias", std::move(bias));
        break;
    }
    case Mod::BiasPadded: {
        // Rows padded to a multiple of 8 elements and 8 more: 16-byte aligned, so the sm80
        // forward copies the bias tile with cp.async, its last chunk of a row part-filled
        // (the broadcast case's rows of Nk elements take the element-by-element copy).
        const int64_t row = (Nk + 7) / 8 * 8 + 8;
        HostTensor bias(c.dtype, {B, Hq, Nq, Nk}, {Hq * Nq * row, Nq * row, row, 1});
        reference::fill_normal(bias, seed + 6);
        in.tensors.emplace("bias", std::move(bias));
        break;
    }
    case Mod::RelativePosition: add_rel(kRelMaxDistance); break;
    case Mod::DocumentMask: add_docs(); break;
    case Mod::PrefixLm: in.scalars["prefix"] = kPrefix; break;
    case Mod::Combination:
        in.scalars["cap"] = kCap + 1.0;
        add_rel(kComboRelMaxDistance);
        add_docs();
        break;
    default: break;
    }
    if (c.sinks) {
        // Around the rows' LSE (about log(Nk) for N(0, 1) scores), spread so that some
        // heads' sinks dominate and others barely count.
        HostTensor z(DType::f32, {Hq}), sinks(*c.sinks, {Hq});
        reference::fill_normal(z, seed + 7);
        const double centre = std::log(static_cast<double>(std::max(1, c.nk)));
        for (int64_t h = 0; h < Hq; ++h) sinks.set({h}, centre - 1.0 + 2.5 * z.get({h}));
        // With 4 heads or more the last one has a sink of -inf: no sink (-inf LSE for a
        // row that keeps no key, and a zero gradient).
        if (Hq >= 4) sinks.set({Hq - 1}, -std::numeric_limits<double>::infinity());
        in.tensors.emplace("sinks", std::move(sinks));
    }

    if (c.gate) {
        HostTensor gate(c.dtype, {B, Hq, Nq, c.dv}, layout_strides(c.layout, B, Hq, Nq, c.dv));
        reference::fill_normal(gate, seed + 8);
        in.tensors.emplace("gate", std::move(gate));
    }
    p.o = HostTensor(c.dtype, {B, Hq, Nq, c.dv}, layout_strides(c.layout, B, Hq, Nq, c.dv));
    reference::fill_poison(p.o);
    if (c.lse) {
        p.lse = HostTensor(DType::f32, {B, Hq, Nq});
        reference::fill_poison(p.lse);
    }
    if (!upload) return p;

    p.dev_q = runtime::to_device(in.q);
    p.dev_k = runtime::to_device(in.k);
    p.dev_v = runtime::to_device(in.v);
    p.dev_o = runtime::to_device(p.o);
    if (c.lse) p.dev_lse = runtime::to_device(p.lse);
    for (const auto& [name, t] : in.tensors) p.d_tensors.emplace(name, runtime::to_device(t));
    return p;
}

LaunchArgs Problem::args() const {
    LaunchArgs a;
    a.q = dev_q.view;
    a.k = dev_k.view;
    a.v = dev_v.view;
    a.o = dev_o.view;
    if (c.lse) a.lse = dev_lse.view;
    for (const auto& [name, t] : d_tensors) a.tensors[name] = t.view;
    a.scalars = in.scalars;
    return a;
}

void Problem::poison_outputs() {
    reference::fill_poison(o);
    dev_o.buffer.upload(o.storage().data(), o.storage().size());
    if (c.lse) {
        reference::fill_poison(lse);
        dev_lse.buffer.upload(lse.storage().data(), lse.storage().size());
    }
}

void Problem::download_outputs() {
    runtime::synchronize("cuCtxSynchronize after the attention kernel");
    runtime::from_device(dev_o, o);
    if (c.lse) runtime::from_device(dev_lse, lse);
}

double max_abs(const reference::DoubleTensor& t) {
    double m = 0;
    for (double x : t.data) m = std::max(m, std::fabs(x));
    return m;
}

Check check_gradient(const std::string& what, const HostTensor& actual, const reference::DoubleTensor& expected,
                     DType dt) {
    return check_output(what, actual, expected, reference::gradient_tolerance(dt, max_abs(expected)));
}

Check check_summed_gradient(const std::string& what, const HostTensor& actual, const reference::DoubleTensor& expected,
                            DType dt) {
    const double t = reference::summed_gradient_tolerance(dt);
    return check_output(what, actual, expected, reference::Tolerance{t * std::max(max_abs(expected), 1e-6), t});
}

Check check_output(const std::string& what, const HostTensor& actual, const reference::DoubleTensor& expected,
                   reference::Tolerance tol) {
    Check r;
    auto cmp = reference::compare(actual, expected, tol);
    if (cmp.ok) return r;
    // Where the largest error is (the reference's report lists the first failures).
    double worst = -1, worst_a = 0, worst_e = 0;
    std::vector<int64_t> worst_idx, first_bad_idx;
    int64_t n = 0;
    actual.for_each_index([&](const int64_t* idx) {
        double a = actual.get(idx), e = expected.data[static_cast<size_t>(n++)];
        bool bad = reference::is_poison(actual, idx) || std::isnan(a) || std::isnan(e) ||
                   ((std::isinf(a) || std::isinf(e)) && a != e);
        double err = bad ? std::numeric_limits<double>::infinity()
                         : (std::isinf(a) ? 0.0 : std::fabs(a - e));
        if (bad && first_bad_idx.empty()) first_bad_idx.assign(idx, idx + actual.rank());
        if (err > worst) {
            worst = err;
            worst_a = a;
            worst_e = e;
            worst_idx.assign(idx, idx + actual.rank());
        }
    });
    std::ostringstream s;
    s << what << ": max abs error " << cmp.max_abs_error << " (max rel " << cmp.max_rel_error << "), worst at "
      << index_str(worst_idx) << " (actual " << worst_a << ", expected " << worst_e << ")";
    if (!first_bad_idx.empty())
        s << "; first NaN/unwritten/infinity mismatch at " << index_str(first_bad_idx);
    s << "\n  " << cmp.report;
    r.ok = false;
    r.message = s.str();
    return r;
}

Check check_fully_masked_rows(const std::string& what, const HostTensor& o, const HostTensor* lse,
                              const reference::DoubleTensor& ref_lse, int64_t* rows) {
    Check r;
    int64_t count = 0;
    const int64_t B = o.size(0), H = o.size(1), N = o.size(2), D = o.size(3);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < N; ++i) {
                if (!(std::isinf(ref_lse.at({b, h, i})) && ref_lse.at({b, h, i}) < 0)) continue;
                ++count;
                if (!r.ok) continue;
                for (int64_t d = 0; d < D && r.ok; ++d) {
                    int64_t idx[4] = {b, h, i, d};
                    double v = o.get(idx);
                    if (v != 0.0 || reference::is_poison(o, idx)) {
                        std::ostringstream s;
                        s << what << ": row [" << b << ", " << h << ", " << i
                          << "] keeps no key, so O must be 0, but O" << index_str({b, h, i, d}) << " = "
                          << (reference::is_poison(o, idx) ? std::string("never written") : std::to_string(v));
                        r = {false, s.str()};
                    }
                }
                if (lse && r.ok) {
                    double l = lse->get({b, h, i});
                    if (!(std::isinf(l) && l < 0)) {
                        std::ostringstream s;
                        s << what << ": row [" << b << ", " << h << ", " << i
                          << "] keeps no key, so LSE must be -inf, but it is "
                          << (reference::is_poison(*lse, std::vector<int64_t>{b, h, i}.data())
                                  ? std::string("never written")
                                  : std::to_string(l));
                        r = {false, s.str()};
                    }
                }
            }
    if (rows) *rows = count;
    return r;
}

bool all_poison(const HostTensor& t) {
    bool all = true;
    t.for_each_index([&](const int64_t* idx) { all = all && reference::is_poison(t, idx); });
    return all;
}

std::vector<Case> forward_matrix() {
    std::vector<Case> cases;
    auto add = [&](Mod mod, DType dt, int dqk, int dv, Shape s, Layout layout = Layout::BHND,
                   bool lse = true) {
        Case c = make_case(mod, dt, dqk, s);
        c.dv = dv;
        c.layout = layout;
        c.lse = lse;
        cases.push_back(c);
    };
    const auto mods = all_mods();

    // A. bf16 D = 128: every length for every modifier.
    const Shape lengths_a[] = {
        {1, 4, 4, 1, 4097},   // decode against a long cache, MHA
        {2, 4, 2, 17, 255},   // GQA, ragged in both
        {2, 4, 1, 129, 1},    // MQA, one key
        {1, 4, 2, 1000, 255}, // many query tiles, Nq > Nk
        {1, 4, 1, 129, 4097}, // many key tiles
    };
    for (Mod m : mods)
        for (const Shape& s : lengths_a) add(m, DType::bf16, 128, 128, s);
    for (Mod m : {Mod::Plain, Mod::CausalBottomRight, Mod::Combination})
        add(m, DType::bf16, 128, 128, {1, 4, 2, 1000, 4097});

    // B. the other dtype x head-dim pairs, one case per modifier, rotating shapes.
    const Shape lengths_b[] = {
        {2, 4, 2, 129, 255}, {1, 4, 1, 17, 4097}, {2, 4, 4, 1000, 255},
        {1, 4, 2, 1, 4097},  {2, 4, 1, 129, 1},   {1, 4, 4, 17, 255},
    };
    struct DtDim {
        DType dt;
        int d;
    };
    const DtDim pairs[] = {{DType::f16, 64}, {DType::f16, 128}, {DType::bf16, 64}, {DType::f32, 64},
                           {DType::f32, 128}};
    int rot = 0;
    for (const DtDim& p : pairs) {
        for (Mod m : mods) add(m, p.dt, p.d, p.d, lengths_b[rot++ % 6]);
        ++rot;  // shift the rotation so each pair sees a different modifier/shape pairing
    }

    // C. the remaining head dims.
    struct Dims {
        int dqk, dv;
    };
    const Dims dims[] = {{32, 32}, {96, 96}, {256, 256}, {128, 64}};
    for (DType dt : {DType::f16, DType::bf16, DType::f32})
        for (const Dims& d : dims) add(Mod::Plain, dt, d.dqk, d.dv, {2, 4, 2, 129, 255});
    for (const Dims& d : dims) add(Mod::CausalBottomRight, DType::bf16, d.dqk, d.dv, {1, 4, 1, 17, 4097});

    // D. [B, N, H, D] layout.
    add(Mod::CausalBottomRight, DType::bf16, 128, 128, {2, 4, 2, 129, 255}, Layout::BNHD);
    add(Mod::Plain, DType::f16, 64, 64, {1, 4, 1, 1000, 255}, Layout::BNHD);
    add(Mod::DocumentMask, DType::f32, 128, 128, {1, 4, 4, 17, 4097}, Layout::BNHD);
    add(Mod::BiasBroadcast, DType::bf16, 64, 64, {2, 4, 2, 129, 1}, Layout::BNHD);

    // D2. the sm90 forward's bias tile by bulk copies (rows of 16-byte multiples): a bias
    // broadcast over the batch (stride 0) and ragged query tiles, MHA and GQA (outside
    // section A's bf16 d128 lengths; BiasPadded covers d128 bf16 there).
    add(Mod::BiasBroadcast, DType::f16, 128, 128, {2, 4, 2, 300, 264});
    add(Mod::BiasBroadcast, DType::bf16, 64, 64, {3, 4, 4, 1000, 136});

    // E. no LSE.
    add(Mod::Plain, DType::bf16, 128, 128, {2, 4, 2, 129, 255}, Layout::BHND, false);
    add(Mod::CausalTopLeft, DType::f16, 64, 64, {1, 4, 4, 1000, 255}, Layout::BHND, false);

    // F. attention sinks: every dtype, ragged GQA with fully masked rows (bottom-right
    // causal, Nq > Nk: rows with no kept key give O = 0, LSE = sink), the score_mod path
    // (softcap), sinks in f16 / bf16, decode, a long cache, d256 (simt), [B, N, H, D], no LSE.
    for (DType dt : {DType::bf16, DType::f16, DType::f32}) {
        cases.push_back(with_sinks(make_case(Mod::CausalBottomRight, dt, 64, {2, 4, 2, 300, 255})));
        cases.push_back(with_sinks(make_case(Mod::Plain, dt, 128, {2, 4, 2, 129, 255})));
    }
    cases.push_back(with_sinks(make_case(Mod::Softcap, DType::bf16, 128, {2, 4, 2, 129, 255}), DType::bf16));
    cases.push_back(with_sinks(make_case(Mod::SlidingWindow, DType::f16, 64, {1, 4, 1, 1000, 4097}), DType::f16));
    cases.push_back(with_sinks(make_case(Mod::AlibiCausal, DType::bf16, 128, {1, 4, 4, 1, 4097})));
    cases.push_back(with_sinks(make_case(Mod::Plain, DType::f32, 256, {1, 4, 2, 129, 255})));
    cases.push_back(with_sinks(make_case(Mod::DocumentMask, DType::bf16, 128, {1, 4, 2, 129, 255})));
    Case bnhd = with_sinks(make_case(Mod::CausalTopLeft, DType::bf16, 64, {2, 4, 2, 129, 255}));
    bnhd.layout = Layout::BNHD;
    cases.push_back(bnhd);
    Case no_lse = with_sinks(make_case(Mod::CausalBottomRight, DType::f16, 64, {1, 4, 4, 300, 255}));
    no_lse.lse = false;
    cases.push_back(no_lse);

    // G. output gate.
    for (const Case& c : gate_cases()) cases.push_back(c);
    return cases;
}

std::vector<Case> gate_cases() {
    std::vector<Case> cases;
    for (DType dt : {DType::bf16, DType::f16, DType::f32})
        cases.push_back(with_gate(make_case(Mod::CausalBottomRight, dt, 64, {2, 4, 2, 129, 255})));
    cases.push_back(with_gate(make_case(Mod::BiasBroadcast, DType::bf16, 32, {2, 8, 8, 200, 200})));
    cases.push_back(with_gate(make_case(Mod::DocumentMask, DType::bf16, 128, {1, 4, 2, 129, 255})));
    Case bnhd = with_gate(make_case(Mod::Plain, DType::bf16, 64, {2, 4, 4, 100, 100}));
    bnhd.layout = Layout::BNHD;
    cases.push_back(bnhd);
    cases.push_back(with_gate(with_sinks(make_case(Mod::Softcap, DType::bf16, 128, {1, 4, 2, 129, 255}))));
    cases.push_back(with_gate(make_case(Mod::Plain, DType::bf16, 256, {1, 2, 2, 65, 100})));
    return cases;
}

Case make_case(Mod mod, DType dtype, int head_dim, Shape shape) {
    Case c;
    c.mod = mod;
    c.dtype = dtype;
    c.dqk = c.dv = head_dim;
    c.batch = shape.batch;
    c.hq = shape.hq;
    c.hkv = shape.hkv;
    c.nq = shape.nq;
    c.nk = shape.nk;
    return c;
}

Case with_sinks(Case c, DType sinks_dtype) {
    c.sinks = sinks_dtype;
    return c;
}

Case with_gate(Case c) {
    c.gate = true;
    return c;
}

Case small_case(Mod mod) { return make_case(mod, DType::bf16, 128, {2, 4, 2, 129, 255}); }

Check run_case(const Case& c) {
    const std::string name = c.name();
    try {
        Problem p = make_problem(c);
        CompileOptions options;
        options.mainloop = c.mainloop;
        Attention attn(p.spec, options);
        p.poison_outputs();
        attn(p.args());
        p.download_outputs();
        auto ref = reference::forward(p.spec, p.in);

        Check r;
        std::string msg;
        auto add = [&](const Check& k) {
            if (!k.ok) {
                r.ok = false;
                msg += (msg.empty() ? "" : "\n") + k.message;
            }
        };
        add(check_output(name + " O", p.o, ref.o, reference::output_tolerance(c.dtype)));
        if (c.lse) add(check_output(name + " LSE", p.lse, ref.lse, reference::kLseTolerance));
        if (c.sinks) {
            // With sinks no row has LSE = -inf: a row with no kept key has LSE = sink (in
            // the comparison above) and O = 0, which the same check sees through a spec
            // without sinks.
            dsl::AttentionSpec plain = p.spec;
            reference::ForwardInputs in = p.in;
            in.tensors.erase("sinks");
            const auto no_sinks = reference::forward(plain.no_sinks(), in);
            add(check_fully_masked_rows(name, p.o, nullptr, no_sinks.lse));
        } else {
            add(check_fully_masked_rows(name, p.o, c.lse ? &p.lse : nullptr, ref.lse));
        }
        r.message = msg;
        return r;
    } catch (const std::exception& e) {
        return {false, name + ": threw " + e.what()};
    }
}

}  // namespace attnjit::gputest
