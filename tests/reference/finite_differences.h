// Finite-difference checks of the fp64 backward reference, shared by the reference tests:
// loss = sum(O * dO), central differences of the forward in every stored element of
// q, k, v and of each captured tensor in `wanted`, and in each wanted runtime scalar.
#pragma once

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "dsl/dsl.h"
#include "reference/attention_backward.h"
#include "reference/attention_reference.h"

namespace attnjit::reference::fd {

using namespace attnjit::dsl;

struct Problem {
    AttentionSpec spec;
    ForwardInputs in;
    HostTensor d_o;
    std::set<std::string> wanted;
};

// f32 inputs: finite differences perturb stored values, so the step is what storage holds.
inline Problem make(int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nk, int64_t Dqk, int64_t Dv, uint64_t seed) {
    Problem p;
    p.spec.dtype(DType::f32).head_dims(static_cast<int>(Dqk), static_cast<int>(Dv));
    p.in.q = HostTensor(DType::f32, {B, Hq, Nq, Dqk});
    p.in.k = HostTensor(DType::f32, {B, Hkv, Nk, Dqk});
    p.in.v = HostTensor(DType::f32, {B, Hkv, Nk, Dv});
    p.d_o = HostTensor(DType::f32, {B, Hq, Nq, Dv});
    fill_normal(p.in.q, seed);
    fill_normal(p.in.k, seed + 1);
    fill_normal(p.in.v, seed + 2);
    fill_normal(p.d_o, seed + 3);
    return p;
}

inline double loss(const Problem& p) {
    const ForwardResult f = forward(p.spec, p.in, 1);
    const DoubleTensor d_o = to_double(p.d_o);
    double l = 0;
    for (size_t n = 0; n < f.o.data.size(); ++n) l += f.o.data[n] * d_o.data[n];
    return l;
}

// Central difference of the loss in one stored element: set(x +- h), with the step as stored.
inline double fd_element(Problem& p, HostTensor& t, const int64_t* idx) {
    const double x = t.get(idx), h = 1e-3 * std::max(1.0, std::fabs(x));
    t.set(idx, x + h);
    const double up_x = t.get(idx), up = loss(p);
    t.set(idx, x - h);
    const double down_x = t.get(idx), down = loss(p);
    t.set(idx, x);
    return (up - down) / (up_x - down_x);
}

// |analytic - fd| within 2e-5 + 2e-4 |fd| (f32 steps of 1e-3: O(h^2) error).
inline void expect_grad(const DoubleTensor& grad, Problem& p, HostTensor& t, const std::string& what) {
    ASSERT_EQ(grad.shape, t.shape()) << what;
    int64_t n = 0;
    t.for_each_index([&](const int64_t* idx) {
        const double g = grad.data[static_cast<size_t>(n++)];
        const double fd = fd_element(p, t, idx);
        ASSERT_FALSE(std::isnan(g)) << what;
        EXPECT_NEAR(g, fd, 2e-5 + 2e-4 * std::fabs(fd)) << what << " element " << n - 1;
    });
}

inline void check(Problem& p, int threads) {
    const BackwardResult g = backward(p.spec, p.in, p.d_o, p.wanted, threads);
    expect_grad(g.dq, p, p.in.q, "dq");
    expect_grad(g.dk, p, p.in.k, "dk");
    expect_grad(g.dv, p, p.in.v, "dv");
    for (const auto& name : p.wanted) {
        if (auto t = p.in.tensors.find(name); t != p.in.tensors.end()) {
            expect_grad(g.dtensors.at(name), p, t->second, "d " + name);
        } else {
            double& c = p.in.scalars.at(name);
            const double x = c, h = 1e-6 * std::max(1.0, std::fabs(x));
            c = x + h;
            const double up = loss(p);
            c = x - h;
            const double down = loss(p);
            c = x;
            EXPECT_NEAR(g.dscalars.at(name), (up - down) / (2 * h), 1e-6 * std::max(1.0, std::fabs(up))) << name;
        }
    }
}

// One thread, and three (workers own different groups, their partials summed).
inline void check(Problem& p) {
    for (int threads : {1, 3}) {
        SCOPED_TRACE("threads " + std::to_string(threads));
        check(p, threads);
    }
}

}  // namespace attnjit::reference::fd
