#include "tests/gpu/head_dim_cases.h"

namespace attnjit::gputest {
namespace {

Case with_dv(Case c, int dv) {
    c.dv = dv;
    return c;
}

}  // namespace

// bf16 at every listed dim (tiles 32, 64, 96, 256 and the first / last dims of a tile), each
// with a modifier and ragged GQA lengths (not multiples of any tile); f16 and f32 at a few;
// Dqk != Dv across tiles; decode (MQA, Nq = 1); sinks and a gate.
std::vector<Case> padded_head_dim_forward_cases() {
    std::vector<Case> cases;
    const Mod mods[] = {Mod::Plain, Mod::CausalBottomRight, Mod::Softcap, Mod::DocumentMask};
    int i = 0;
    for (int d : {8, 16, 24, 40, 72, 80, 136, 200})
        cases.push_back(make_case(mods[i++ % 4], DType::bf16, d, {2, 4, 2, 129, 255}));
    for (int d : {8, 40, 200}) cases.push_back(make_case(Mod::CausalTopLeft, DType::f16, d, {1, 4, 4, 100, 300}));
    for (int d : {16, 72, 136}) cases.push_back(make_case(Mod::AlibiCausal, DType::f32, d, {2, 4, 2, 77, 130}));
    cases.push_back(with_dv(make_case(Mod::Plain, DType::bf16, 40, {2, 4, 2, 129, 255}), 72));
    cases.push_back(with_dv(make_case(Mod::CausalBottomRight, DType::bf16, 200, {1, 4, 2, 65, 100}), 24));
    cases.push_back(with_dv(make_case(Mod::Plain, DType::f32, 8, {1, 4, 2, 65, 100}), 136));
    cases.push_back(make_case(Mod::SlidingWindow, DType::bf16, 80, {1, 4, 1, 1, 1000}));  // decode, MQA
    cases.push_back(with_sinks(make_case(Mod::CausalBottomRight, DType::bf16, 24, {2, 4, 2, 150, 129})));
    cases.push_back(with_gate(make_case(Mod::BiasBroadcast, DType::bf16, 16, {2, 4, 4, 100, 100})));
    return cases;
}

// The same dims through the backward: bf16 d 40, 112, 136 and 200 (and 48 x 112, 256 x 40)
// have the fused backward (tiles 64, 128, 256 in column halves), the others the two-pass one
// (sm80 up to 128, simt above).
std::vector<Case> padded_head_dim_backward_cases() {
    std::vector<Case> cases;
    const Mod mods[] = {Mod::CausalBottomRight, Mod::Plain, Mod::Softcap, Mod::AlibiCausal};
    int i = 0;
    for (int d : {8, 16, 24, 40, 72, 80, 112, 136, 200})
        cases.push_back(make_case(mods[i++ % 4], DType::bf16, d, {2, 4, 2, 77, 130}));
    for (int d : {40, 112}) cases.push_back(make_case(Mod::CausalTopLeft, DType::f16, d, {1, 2, 2, 65, 100}));
    for (int d : {16, 72}) cases.push_back(make_case(Mod::Plain, DType::f32, d, {1, 2, 1, 65, 100}));
    cases.push_back(with_dv(make_case(Mod::CausalBottomRight, DType::bf16, 40, {2, 4, 2, 77, 130}), 72));
    cases.push_back(with_dv(make_case(Mod::Plain, DType::bf16, 48, {1, 4, 2, 65, 100}), 112));
    cases.push_back(with_dv(make_case(Mod::Plain, DType::bf16, 200, {1, 2, 2, 65, 100}), 16));
    cases.push_back(with_dv(make_case(Mod::Softcap, DType::bf16, 256, {2, 4, 2, 77, 130}), 40));
    cases.push_back(with_sinks(make_case(Mod::CausalBottomRight, DType::bf16, 24, {2, 4, 2, 150, 129})));
    cases.push_back(with_gate(make_case(Mod::Plain, DType::bf16, 40, {2, 4, 2, 100, 100})));
    cases.push_back(with_gate(make_case(Mod::Plain, DType::bf16, 200, {1, 2, 2, 65, 100})));
    return cases;
}

}  // namespace attnjit::gputest
