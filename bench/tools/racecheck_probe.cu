// What compute-sanitizer's racecheck makes of the hand-offs the sm90 kernels use between warps:
// a shared-memory write by one warp, read by another after a synchronisation. Each kernel is
// correct except `unsynchronised`, the planted race that shows the tool reports one.
//
//   nvcc -arch=sm_90a -o racecheck_probe bench/tools/racecheck_probe.cu
//   compute-sanitizer --tool racecheck ./racecheck_probe KERNEL
//
// KERNEL: block_barrier (__syncthreads), named_barrier (bar.arrive by the writers, bar.sync
// by the readers, as the sm90 kernels' named barriers), mbarrier (mbarrier.arrive by the
// writer, mbarrier.try_wait.parity by the readers, as their stage rings), named_ring (the sm90
// backward's dQ hand-over: a slot per step parity written by one warp, read by another, a named
// barrier each way and an end marker), unsynchronised.
// Exit status 0 when the readers saw the written values (the race may still read them).
#include <cstdio>
#include <cstring>

namespace {

constexpr int kWords = 64;

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Warp 0 writes data[], warp 1 reads it after the hand-off `kind`.
template <int kind>
__global__ void hand_off(int* out) {
    __shared__ alignas(8) unsigned long long bar;
    __shared__ int data[kWords];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const unsigned b = smem_addr(&bar);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (warp == 0) {
        data[lane] = 3 * lane + 1;
        data[lane + 32] = 5 * lane + 2;
        if (kind == 1) asm volatile("bar.arrive 1, 64;" ::: "memory");
        if (kind == 2) {
            __syncwarp();
            if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(b) : "memory");
        }
    }
    if (kind == 0) __syncthreads();
    if (warp == 1) {
        if (kind == 1) asm volatile("bar.sync 1, 64;" ::: "memory");
        if (kind == 2)
            asm volatile(
                "{\n.reg .pred done;\nwait_%=:\n"
                "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
                "@!done bra wait_%=;\n}\n" ::"r"(b)
                : "memory");
        out[lane] = data[63 - lane];
        out[lane + 32] = data[31 - lane];
    }
}

// named_ring: warp 0 hands warp 1 one word a step through two slots (by step parity), as the
// sm90 backward's consumers hand the dQ writer its steps: barrier 1 one way, 2 back.
__global__ void named_ring(int* out, int steps) {
    __shared__ int slot[2];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (warp == 1) {  // the reader
        asm volatile("bar.arrive 2, 64;" ::: "memory");  // both slots start free
        for (int s = 0;; ++s) {
            asm volatile("bar.sync 1, 64;" ::: "memory");
            const int v = reinterpret_cast<volatile int*>(slot)[s & 1];
            if (v < 0) break;
            if (lane == 0) out[s] = v;
            asm volatile("bar.arrive 2, 64;" ::: "memory");
        }
    } else {  // the writer: the slot first, then the wait for the reader's last step
        for (int s = 0; s < steps; ++s) {
            if (lane == 0) reinterpret_cast<volatile int*>(slot)[s & 1] = 7 * s + 3;
            asm volatile("bar.sync 2, 64;" ::: "memory");
            asm volatile("bar.arrive 1, 64;" ::: "memory");
        }
        asm volatile("bar.sync 2, 64;" ::: "memory");
        if (lane == 0) reinterpret_cast<volatile int*>(slot)[steps & 1] = -1;
        asm volatile("bar.arrive 1, 64;" ::: "memory");
    }
}

}  // namespace

int main(int argc, char** argv) {
    const char* names[] = {"block_barrier", "named_barrier", "mbarrier", "unsynchronised", "named_ring"};
    int kind = -1;
    for (int k = 0; k < 5 && argc == 2; ++k)
        if (std::strcmp(argv[1], names[k]) == 0) kind = k;
    if (kind < 0) {
        std::fprintf(stderr, "usage: %s block_barrier|named_barrier|mbarrier|unsynchronised|named_ring\n", argv[0]);
        return 2;
    }
    int* out = nullptr;
    cudaMalloc(&out, kWords * sizeof(int));
    if (kind == 0) hand_off<0><<<1, 64>>>(out);
    if (kind == 1) hand_off<1><<<1, 64>>>(out);
    if (kind == 2) hand_off<2><<<1, 64>>>(out);
    if (kind == 3) hand_off<3><<<1, 64>>>(out);
    if (kind == 4) named_ring<<<1, 64>>>(out, kWords);
    int host[kWords];
    const cudaError_t err = cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost);
    if (err != cudaSuccess) {
        std::fprintf(stderr, "%s: %s\n", names[kind], cudaGetErrorString(err));
        return 1;
    }
    int wrong = 0;
    for (int i = 0; i < 32; ++i) {
        if (kind == 4) {
            wrong += (host[i] != 7 * i + 3) + (host[i + 32] != 7 * (i + 32) + 3);
            continue;
        }
        wrong += host[i] != 5 * (31 - i) + 2;
        wrong += host[i + 32] != 3 * (31 - i) + 1;
    }
    std::printf("%s: %d of %d words as written\n", names[kind], kWords - wrong, kWords);
    return wrong == 0 || kind == 3 ? 0 : 1;
}
