// The step cursors' growing boxes (templates/attnjit/common/skipped_runs.cuh) on the host,
// against a tile-by-tile walk: random skip patterns, boxes that answer exactly and boxes
// that answer conservatively (kSkip only where every tile skips, and sometimes not even
// then), and the number of box tests a long run costs.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "attnjit/common/skipped_runs.cuh"

namespace attnjit {
namespace {

// A box test over `skip` (true: the tile skips); `doubt` in [0, 1]: how often a box of
// several tiles that all skip still says it may not (classify's intervals are conservative).
struct Boxes {
    const std::vector<bool>& skip;
    std::mt19937* rng = nullptr;
    double doubt = 0;
    mutable int calls = 0;
    bool operator()(int from, int len) const {
        ++calls;
        EXPECT_GE(from, 0);
        EXPECT_GE(len, 1);
        EXPECT_LE(from + len, static_cast<int>(skip.size()));
        for (int i = from; i < from + len; ++i)
            if (!skip[i]) return false;
        return !(len > 1 && rng && std::uniform_real_distribution<double>(0, 1)(*rng) < doubt);
    }
};

int skipped_prefix(const std::vector<bool>& skip, int limit) {
    int run = 0;
    while (run < limit && skip[run]) ++run;
    return run;
}

TEST(SkippedRuns, GrowNeverPassesAKeptTileAndReachesItWithExactBoxes) {
    std::mt19937 rng(7);
    for (int it = 0; it < 20000; ++it) {
        const int n = 1 + static_cast<int>(rng() % 80);
        std::vector<bool> skip(n);
        const double p = std::uniform_real_distribution<double>(0, 1)(rng);
        for (int i = 0; i < n; ++i) skip[i] = std::uniform_real_distribution<double>(0, 1)(rng) < p;
        skip[0] = true;
        const int limit = 1 + static_cast<int>(rng() % n), truth = skipped_prefix(skip, limit);
        const int known = 1 + static_cast<int>(rng() % truth);
        const int exact = grow_skipped_run(known, limit, Boxes{skip});
        Boxes doubtful{skip, &rng, 0.3};
        const int conservative = grow_skipped_run(known, limit, doubtful);
        // Never past a kept tile or the limit, never below what was known.
        EXPECT_LE(exact, truth);
        EXPECT_LE(conservative, truth);
        EXPECT_GE(conservative, known);
        // With exact boxes the run stops short only where the next box holds a kept tile.
        if (exact < limit) {
            const int len = 2 * exact < limit ? exact : limit - exact;
            EXPECT_LT(truth, exact + len) << "n " << n << " limit " << limit << " known " << known;
        }
    }
}

TEST(SkippedRuns, FirstUnskippedIsTheTileByTileAnswer) {
    std::mt19937 rng(11);
    for (int it = 0; it < 20000; ++it) {
        const int n = static_cast<int>(rng() % 90);
        std::vector<bool> skip(n);
        const double p = std::uniform_real_distribution<double>(0, 1)(rng);
        for (int i = 0; i < n; ++i) skip[i] = std::uniform_real_distribution<double>(0, 1)(rng) < p;
        const int truth = skipped_prefix(skip, n);  // n when every tile skips
        EXPECT_EQ(first_unskipped(n, Boxes{skip}), truth);
        Boxes doubtful{skip, &rng, 0.5};
        EXPECT_EQ(first_unskipped(n, doubtful), truth);
    }
    const std::vector<bool> none;
    EXPECT_EQ(first_unskipped(0, Boxes{none}), 0);
    EXPECT_EQ(first_unskipped(-3, Boxes{none}), -3);  // an empty range: no tile below count
}

// What the boxes are for: a run of skipped tiles costs a few box tests, not one a tile.
TEST(SkippedRuns, ALongRunCostsLogarithmicallyManyBoxes) {
    std::vector<bool> skip(1000, true);
    skip[700] = false;
    Boxes boxes{skip};
    EXPECT_EQ(first_unskipped(1000, boxes), 700);
    // Each restart doubles up to the largest run before the kept tile (log2 of the distance
    // + 2 tests) and at least halves the distance: ~(10 + 2) + (9 + 2) + ... <= 64 for 700;
    // a tile-by-tile walk takes 701.
    EXPECT_LE(boxes.calls, 64);
    Boxes whole{skip};
    EXPECT_EQ(grow_skipped_run(1, 700, whole), 700);
    EXPECT_LE(whole.calls, 10);
}

}  // namespace
}  // namespace attnjit
