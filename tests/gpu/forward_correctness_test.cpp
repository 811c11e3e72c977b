// Forward kernels against the fp64 CPU reference, over every ready-made modifier x
// dtype x head dims x ragged lengths x MHA/GQA/MQA, plus a transposed layout, no-LSE and
// fully-masked rows. Every case draws fresh seeded N(0, 1) inputs, poisons O and LSE on
// the device before the launch, and fails on NaN, unwritten elements or any element
// outside the reference's per-dtype tolerance (reference/tolerance.h).
//
// The matrix (forward_matrix() in gpu_test_support.cpp), sized to run in a few minutes on one H100 with
// `ctest -j`:
//  A. every modifier, bf16, D = 128: each Nq in {1, 17, 129, 1000} and each Nk in
//     {1, 255, 4097} at least once, with MHA (Hkv = Hq = 4), GQA (Hkv = 2) and MQA
//     (Hkv = 1); plus Nq = 1000 x Nk = 4097 for three of them.
//  B. every modifier at fp16 D 64 and 128, bf16 D 64, fp32 D 64 and 128: one case each,
//     lengths and head counts rotating through a list.
//  C. plain attention at D = 32, 96, 256 and Dqk/Dv = 128/64 in all three dtypes; bf16
//     bottom-right causal at the same dims.
//  D. the [B, N, H, D] layout (Q, K, V and O through strides, no copy).
//  E. no LSE requested.
// HeadDims/*: head dims between the tile sizes (8 to 200; tests/gpu/head_dim_cases.cpp).
// FullyMasked: rows with no kept key (O = 0 exactly, LSE = -inf, never NaN).
// On an H100 or H200 the default loop of f16 / bf16 cases at head dims 33-64, 97-128 and
// 129-256 is the sm90 one; MatrixSm80 runs the same cases on the sm80 loop.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>

#include "tests/common/expect_error.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/gpu/head_dim_cases.h"

namespace attnjit::gputest {
namespace {

class Forward : public ::testing::TestWithParam<Case> {};

TEST_P(Forward, MatchesReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    Check r = run_case(GetParam());
    EXPECT_TRUE(r.ok) << r.message;
}

INSTANTIATE_TEST_SUITE_P(Matrix, Forward, ::testing::ValuesIn(forward_matrix()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); });

// The same cases on the sm80 loop, where the default is the sm90 one (an H100 or H200).
INSTANTIATE_TEST_SUITE_P(MatrixSm80, Forward, ::testing::ValuesIn(on_sm80_loop(forward_matrix())),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); });

// Head dims between the tile sizes (tests/gpu/head_dim_cases.cpp).
INSTANTIATE_TEST_SUITE_P(HeadDims, Forward, ::testing::ValuesIn(padded_head_dim_forward_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); });

// The matrix promises: every modifier meets every length with bf16 D = 128, and every
// modifier runs in every dtype at D 64 and 128. Needs no GPU.
TEST(ForwardMatrix, CoversEveryLengthForEveryModifier) {
    const auto cases = forward_matrix();
    std::set<std::string> names;
    for (const Case& c : cases) EXPECT_TRUE(names.insert(c.name()).second) << "duplicate case " << c.name();
    for (Mod m : all_mods()) {
        std::set<int> nq, nk;
        std::set<std::pair<int, int>> dt_dim;
        for (const Case& c : cases) {
            if (c.mod != m) continue;
            if (c.dtype == DType::bf16 && c.dqk == 128 && c.dv == 128) {
                nq.insert(c.nq);
                nk.insert(c.nk);
            }
            if (c.dqk == c.dv) dt_dim.insert({static_cast<int>(c.dtype), c.dqk});
        }
        EXPECT_EQ(nq, (std::set<int>{1, 17, 129, 1000})) << mod_name(m);
        EXPECT_EQ(nk, (std::set<int>{1, 255, 4097})) << mod_name(m);
        for (DType dt : {DType::f16, DType::bf16, DType::f32})
            for (int d : {64, 128})
                EXPECT_TRUE(dt_dim.count({static_cast<int>(dt), d}))
                    << mod_name(m) << " never runs in " << dtype_name(dt) << " D=" << d;
    }
}

// Needs no GPU: the head-dim cases cover the dims asked for (8 to 200, each in bf16 forward
// and backward; f16 and f32 too), with ragged lengths, GQA and Dqk != Dv, and build on the host.
TEST(HeadDimCases, CoverTheDimsAndBuildOnTheHost) {
    for (const auto& cases : {padded_head_dim_forward_cases(), padded_head_dim_backward_cases()}) {
        std::set<int> bf16_dims;
        std::set<DType> dtypes;
        bool gqa = false, uneven = false, ragged = false;
        for (const Case& c : cases) {
            if (c.dtype == DType::bf16) bf16_dims.insert(c.dqk);
            dtypes.insert(c.dtype);
            gqa = gqa || (c.hkv > 1 && c.hkv < c.hq);
            uneven = uneven || c.dqk != c.dv;
            ragged = ragged || (c.nq % 16 != 0 && c.nk % 16 != 0);
            auto tile = [](int d) { return d == 32 || d == 64 || d == 96 || d == 128 || d == 256; };
            EXPECT_TRUE(!tile(c.dqk) || !tile(c.dv)) << c.name() << ": no padded head dim";
            const Problem p = make_problem(c, false);
            EXPECT_EQ(p.in.q.size(3), c.dqk) << c.name();
            EXPECT_EQ(p.in.v.size(3), c.dv) << c.name();
        }
        for (int d : {8, 16, 24, 40, 72, 80, 136, 200}) EXPECT_TRUE(bf16_dims.count(d)) << "bf16 d" << d;
        EXPECT_EQ(dtypes, (std::set<DType>{DType::f16, DType::bf16, DType::f32}));
        EXPECT_TRUE(gqa && uneven && ragged);
    }
}

// Needs no GPU: each sinks case of the matrix builds on the host, and in its reference a
// row that keeps no key has LSE = its head's sink (-inf for the last head's -inf sink)
// and O = 0; some case has such rows.
TEST(ForwardMatrix, SinksCasesHaveTheirEmptyRowsOnTheHost) {
    int64_t empty_rows = 0;
    for (const Case& c : forward_matrix()) {
        if (!c.sinks || static_cast<int64_t>(c.nq) * c.nk > 1000000) continue;  // the long ones: on the GPU
        const Problem p = make_problem(c, false);
        const auto ref = reference::forward(p.spec, p.in);
        reference::ForwardInputs in = p.in;
        in.tensors.erase("sinks");
        dsl::AttentionSpec plain = p.spec;
        const auto without = reference::forward(plain.no_sinks(), in);
        const HostTensor& sinks = p.in.tensors.at("sinks");
        for (int64_t b = 0; b < c.batch; ++b)
            for (int64_t h = 0; h < c.hq; ++h)
                for (int64_t i = 0; i < c.nq; ++i) {
                    if (without.lse.at({b, h, i}) != -std::numeric_limits<double>::infinity()) continue;
                    ++empty_rows;
                    EXPECT_EQ(ref.lse.at({b, h, i}), sinks.get({h})) << c.name();
                    EXPECT_EQ(ref.o.at({b, h, i, 0}), 0.0) << c.name();
                }
    }
    EXPECT_GT(empty_rows, 0);
}

// ---- fully masked rows -----------------------------------------------------------------

// Bottom-right causal with Nq > Nk: the first Nq - Nk query rows keep no key.
TEST(FullyMasked, CausalBottomRightWithMoreQueriesThanKeys) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    for (DType dt : {DType::bf16, DType::f16, DType::f32}) {
        const Case c = make_case(Mod::CausalBottomRight, dt, 64, {2, 4, 2, 129, 17});
        Check r = run_case(c);  // includes check_fully_masked_rows
        EXPECT_TRUE(r.ok) << r.message;
    }
}

// More key tiles than a CTA has threads: the batched classification of data-dependent
// masks (kv_schedule.cuh) refills its chunk of tile classes three times (313 tiles of 64
// keys), with documents that start and end inside chunks.
TEST(LongKeys, DocumentMaskOverSeveralClassifyChunks) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    for (DType dt : {DType::bf16, DType::f32}) {
        const Case c = make_case(Mod::DocumentMask, dt, 64, {1, 2, 1, 300, 20000});
        Check r = run_case(c);
        EXPECT_TRUE(r.ok) << r.message;
    }
}

// Document mask where some query documents have no keys at all (and, in batch 1, no
// query has a key): those rows are O = 0, LSE = -inf; the others match the reference.
TEST(FullyMasked, DocumentsWithoutKeys) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    for (DType dt : {DType::bf16, DType::f16, DType::f32}) {
        const Case c = make_case(Mod::DocumentMask, dt, 128, {2, 4, 1, 129, 255});
        const std::string name = c.name() + "_docs_without_keys";
        Problem p = make_problem(c);
        // Keys: documents 0 and 2 in batch 0, document 5 in batch 1. Queries: documents
        // 0..3 in batch 0 (1 and 3 have no keys), document 7 in batch 1 (nothing kept).
        auto& kv_doc = p.in.tensors.at("kv_doc");
        auto& q_doc = p.in.tensors.at("q_doc");
        for (int64_t j = 0; j < c.nk; ++j) {
            kv_doc.set({0, j}, j < c.nk / 2 ? 0 : 2);
            kv_doc.set({1, j}, 5);
        }
        for (int64_t i = 0; i < c.nq; ++i) {
            q_doc.set({0, i}, i % 4);
            q_doc.set({1, i}, 7);
        }
        p.d_tensors.at("kv_doc").buffer.upload(kv_doc.storage().data(), kv_doc.storage().size());
        p.d_tensors.at("q_doc").buffer.upload(q_doc.storage().data(), q_doc.storage().size());

        Attention attn(p.spec);
        p.poison_outputs();
        attn(p.args());
        p.download_outputs();
        auto ref = reference::forward(p.spec, p.in);
        int64_t masked_rows = 0;
        Check m = check_fully_masked_rows(name, p.o, &p.lse, ref.lse, &masked_rows);
        EXPECT_TRUE(m.ok) << m.message;
        // Batch 0: half the 129 rows (docs 1 and 3) x 4 heads; batch 1: all 129 x 4.
        EXPECT_EQ(masked_rows, 64 * 4 + 129 * 4) << name;
        Check o = check_output(name + " O", p.o, ref.o, reference::output_tolerance(dt));
        EXPECT_TRUE(o.ok) << o.message;
        Check l = check_output(name + " LSE", p.lse, ref.lse, reference::kLseTolerance);
        EXPECT_TRUE(l.ok) << l.message;
    }
}

// ---- layouts the sm90 loop's bulk copies cannot read ---------------------------------------

// K and V shared by the batch rows through a stride of 0: a tensor map cannot describe the
// broadcast, so on an H100 / H200 Attention runs the call on the sm80 kernel (compiled on first
// need, api/tma_maps.h); with CompileOptions.mainloop = sm90 it is a UserError instead.
TEST(Strides, KeysAndValuesBroadcastOverTheBatch) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    for (DType dt : {DType::bf16, DType::f16}) {
        const Case c = make_case(Mod::CausalBottomRight, dt, 128, {2, 4, 2, 129, 255});
        Problem p = make_problem(c);
        for (HostTensor* t : {&p.in.k, &p.in.v}) {  // batch row 1 := batch row 0, as the view reads it
            auto* bytes = static_cast<uint8_t*>(t->data());
            const size_t row = static_cast<size_t>(t->strides()[0]) * dtype_size(t->dtype());
            std::memcpy(bytes + row, bytes, row);
        }
        LaunchArgs a = p.args();
        a.k.strides[0] = 0;
        a.v.strides[0] = 0;
        Attention attn(p.spec);
        p.poison_outputs();
        attn(a);
        p.download_outputs();
        const auto ref = reference::forward(p.spec, p.in);
        Check o = check_output(c.name() + "_kv_broadcast O", p.o, ref.o, reference::output_tolerance(dt));
        EXPECT_TRUE(o.ok) << o.message;
        Check l = check_output(c.name() + "_kv_broadcast LSE", p.lse, ref.lse, reference::kLseTolerance);
        EXPECT_TRUE(l.ok) << l.message;
        if (attn.config().mainloop == MainloopKind::sm90) {
            CompileOptions forced;
            forced.mainloop = MainloopKind::sm90;
            EXPECT_USER_ERROR(Attention(p.spec, forced)(a), "is broadcast (stride 0) over dimension 0");
        }
    }
}

// More (query tile, head, batch) items than SMs, with tiles of different weight (causal,
// documents, a sliding window): the CTA order of cta_order.cuh over a grid larger than one
// wave, and on the sm90 loop its persistent grid (one CTA an SM, items handed out by a
// counter), checked against the reference and bit for bit against the same kernel launched
// one CTA an item (ATTNJIT_SM90_GRID=items): each item's sums are the same either way. The
// persistent grid runs twice: the first launch must leave its counter at zero.
TEST(WorkItems, MoreQueryTilesThanSMs) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const int sms = runtime::current_device().sm_count;
    struct Item {
        Mod mod;
        DType dt;
        int d;
        Shape dims;
    };
    for (const Item& sh : {Item{Mod::Plain, DType::bf16, 64, {2, 16, 8, 1000, 1000}},
                            Item{Mod::CausalBottomRight, DType::bf16, 64, {2, 16, 8, 1000, 1000}},
                            Item{Mod::DocumentMask, DType::bf16, 64, {2, 16, 8, 1000, 1000}},
                            Item{Mod::SlidingWindow, DType::f16, 128, {3, 12, 4, 700, 900}},
                            Item{Mod::Combination, DType::bf16, 128, {2, 24, 24, 640, 333}},
                            Item{Mod::AlibiCausal, DType::f16, 64, {1, 40, 8, 900, 900}}}) {
        const Case c = make_case(sh.mod, sh.dt, sh.d, sh.dims);
        // Query tiles of 128 rows, the largest block_m.
        ASSERT_GT(c.batch * c.hq * ((c.nq + 127) / 128), sms) << c.name() << ": more query tiles than SMs";
        Problem p = make_problem(c);
        const auto ref = reference::forward(p.spec, p.in);
        Attention attn(p.spec);
        std::vector<uint8_t> outputs[3];
        for (int run : {0, 1, 2}) {
            const bool one_cta_an_item = run == 2;
            if (one_cta_an_item) ::setenv("ATTNJIT_SM90_GRID", "items", 1);
            p.poison_outputs();
            attn(p.args());
            p.download_outputs();
            ::unsetenv("ATTNJIT_SM90_GRID");
            const std::string grid = one_cta_an_item ? " (one CTA an item)" : "";
            const Check o = check_output(c.name() + grid + " O", p.o, ref.o, reference::output_tolerance(c.dtype));
            EXPECT_TRUE(o.ok) << o.message;
            const Check l = check_output(c.name() + grid + " LSE", p.lse, ref.lse, reference::kLseTolerance);
            EXPECT_TRUE(l.ok) << l.message;
            outputs[run] = p.o.storage();
        }
        if (attn.config().mainloop == MainloopKind::sm90) {
            EXPECT_TRUE(outputs[0] == outputs[1]) << c.name() << ": the persistent grid's second launch differs from its first";
            EXPECT_TRUE(outputs[0] == outputs[2]) << c.name() << ": the persistent grid's O differs from one CTA an item's";
        }
    }
}

}  // namespace
}  // namespace attnjit::gputest
