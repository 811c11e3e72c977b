// fold_range (templates/attnjit/common/range_read.cuh) on the host: every element of
// [first, last] read exactly once, for each element size, any alignment of the range's start
// and end, strided ranges and empty ranges.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "attnjit/common/range_read.cuh"

namespace attnjit {
namespace {

// Element e of the storage holds e, so the values fold_range hands out (copies of the loaded
// elements) tell which elements it read: exactly base[i * stride] for i in [first, last].
template <class T>
void check_values(int elements) {
    alignas(16) static unsigned char storage[16 * 1024 + 64];
    std::mt19937 rng(11);
    for (int offset = 0; offset < 16; offset += static_cast<int>(sizeof(T))) {  // the start's alignment
        T* base = reinterpret_cast<T*>(storage + offset);
        for (int e = 0; e < elements; ++e) base[e] = static_cast<T>(e);
        for (int trial = 0; trial < 300; ++trial) {
            const long long stride = trial % 5 == 0 ? 3 : 1;
            const int indices = static_cast<int>((elements - 1) / stride + 1);
            const int first = std::uniform_int_distribution<int>(0, indices - 1)(rng);
            const int last = std::uniform_int_distribution<int>(first - 2, indices - 1)(rng);  // some empty
            std::vector<int> count(elements, 0);
            fold_range(base, stride, first, last, [&](const T& x) {
                const long long v = static_cast<long long>(x);
                ASSERT_GE(v, 0);
                ASSERT_LT(v, elements);
                ++count[v];
            });
            for (int e = 0; e < elements; ++e) {
                const bool read = e % stride == 0 && e / stride >= first && e / stride <= last;
                ASSERT_EQ(count[e], read ? 1 : 0) << "element " << e << ", range [" << first << ", " << last
                                                 << "] stride " << stride << ", element size " << sizeof(T)
                                                 << ", start offset " << offset;
            }
        }
    }
}

// Every short range near the start, where the aligned head, the 16-byte body and the tail
// take turns (a range of 0 to 40 elements from each of the first 40).
template <class T>
void check_short_ranges() {
    alignas(16) static unsigned char storage[1024];
    T* base = reinterpret_cast<T*>(storage);
    for (int e = 0; e < 100; ++e) base[e] = static_cast<T>(e);
    for (int first = 0; first < 40; ++first)
        for (int last = first - 1; last < first + 40; ++last) {
            std::vector<int> count(100, 0);
            fold_range(base, 1, first, last, [&](const T& x) { ++count[static_cast<int>(x)]; });
            for (int e = 0; e < 100; ++e)
                ASSERT_EQ(count[e], e >= first && e <= last ? 1 : 0)
                    << "element " << e << ", range [" << first << ", " << last << "], element size " << sizeof(T);
        }
}

TEST(FoldRange, EveryShortRange) {
    check_short_ranges<int>();
    check_short_ranges<long long>();
    check_short_ranges<std::uint16_t>();
    check_short_ranges<unsigned char>();
    check_short_ranges<float>();
}

TEST(FoldRange, EveryElementOnceForEachSizeAndAlignment) {
    check_values<int>(700);
    check_values<long long>(700);
    check_values<std::uint16_t>(700);
    check_values<unsigned char>(250);  // values stay below 256
    check_values<float>(700);
}

TEST(FoldRange, EmptyRangesReadNothing) {
    alignas(16) int data[64] = {};
    int calls = 0;
    auto count = [&](int) { ++calls; };
    fold_range(data, 1, 5, 4, count);
    fold_range(data, 1, 40, 3, count);
    fold_range(data, 7, 9, 2, count);
    EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace attnjit
