#include "reference/latent.h"

#include <tuple>
#include <vector>

#include "reference/parallel.h"
#include "support/error.h"

namespace attnjit::reference {

void check_latent_kv(const char* who, const dsl::AttentionSpec& spec, const ForwardInputs& in) {
    const int64_t L = spec.latent_dim();
    for (const auto& [t, name, what] : {std::tuple{&in.k, "k", "keys"}, std::tuple{&in.v, "v", "values"}})
        user_check(t->size(1) == 1 && t->size(3) == L)
            << who << ": " << name << " is " << t->describe() << "; with spec.latent(" << L << ", ...) it holds the latent "
            << what << ", [B, 1, Nk, L] = [" << t->size(0) << ", 1, " << t->size(2) << ", " << L
            << "]: one head shared by every query head";
}

void check_latent_weights(const char* who, const dsl::AttentionSpec& spec, const ForwardInputs& in) {
    const int64_t Hq = in.q.size(1), Dqk = in.q.size(3), L = spec.latent_dim(), Dv = spec.head_dim_v();
    const HostTensor& wq = in.tensors.at(spec.latent_w_qlat());
    user_check(wq.shape() == std::vector<int64_t>({Hq, Dqk, L}))
        << who << ": the latent query projection w_qlat '" << spec.latent_w_qlat() << "' is " << wq.describe()
        << "; it must be [Hq, Dqk, L] = [" << Hq << ", " << Dqk << ", " << L << "]";
    const HostTensor& wv = in.tensors.at(spec.latent_w_vup());
    user_check(wv.shape() == std::vector<int64_t>({Hq, L, Dv}))
        << who << ": the latent up-projection w_vup '" << spec.latent_w_vup() << "' is " << wv.describe()
        << "; it must be [Hq, L, Dv] = [" << Hq << ", " << L << ", " << Dv << "]";
}

DoubleTensor project(const DoubleTensor& x, const HostTensor& w, int threads) {
    const int64_t B = x.shape[0], H = x.shape[1], N = x.shape[2], Din = x.shape[3], Dout = w.size(2);
    internal_check(w.rank() == 3 && w.size(0) == H && w.size(1) == Din) << "project: x and w do not chain";
    const DoubleTensor wd = to_double(w);
    DoubleTensor y({B, H, N, Dout});
    const int64_t rows = B * H * N;
    parallel_ranges(rows, worker_count(rows, threads, 64), [&](int, int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
            const double* xr = x.data.data() + row * Din;
            const double* wh = wd.data.data() + (row / N) % H * Din * Dout;
            double* yr = y.data.data() + row * Dout;
            for (int64_t c = 0; c < Din; ++c)
                for (int64_t d = 0; d < Dout; ++d) yr[d] += xr[c] * wh[c * Dout + d];
        }
    });
    return y;
}

DoubleTensor project_backward(const DoubleTensor& x, const HostTensor& w, const DoubleTensor& dy, DoubleTensor* dw,
                              int threads) {
    const int64_t B = x.shape[0], H = x.shape[1], N = x.shape[2], Din = x.shape[3], Dout = w.size(2);
    internal_check(w.rank() == 3 && w.size(0) == H && w.size(1) == Din &&
                   dy.shape == std::vector<int64_t>({B, H, N, Dout}) && (!dw || dw->shape == w.shape()))
        << "project_backward: x, w and dy do not chain";
    const DoubleTensor wd = to_double(w);
    DoubleTensor dx({B, H, N, Din});
    const int64_t rows = B * H * N;
    parallel_ranges(rows, worker_count(rows, threads, 64), [&](int, int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
            const double* dyr = dy.data.data() + row * Dout;
            const double* wh = wd.data.data() + (row / N) % H * Din * Dout;
            double* dxr = dx.data.data() + row * Din;
            for (int64_t c = 0; c < Din; ++c)
                for (int64_t d = 0; d < Dout; ++d) dxr[c] += dyr[d] * wh[c * Dout + d];
        }
    });
    if (!dw) return dx;
    // Workers own whole heads: dw[h] sums over b and the rows in the same order for any count.
    parallel_ranges(H, worker_count(H, threads, 1), [&](int, int64_t begin, int64_t end) {
        for (int64_t h = begin; h < end; ++h) {
            double* dwh = dw->data.data() + h * Din * Dout;
            for (int64_t b = 0; b < B; ++b)
                for (int64_t i = 0; i < N; ++i) {
                    const int64_t row = (b * H + h) * N + i;
                    const double* xr = x.data.data() + row * Din;
                    const double* dyr = dy.data.data() + row * Dout;
                    for (int64_t c = 0; c < Din; ++c)
                        for (int64_t d = 0; d < Dout; ++d) dwh[c * Dout + d] += xr[c] * dyr[d];
                }
        }
    });
    return dx;
}

}  // namespace attnjit::reference
