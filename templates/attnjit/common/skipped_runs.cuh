// Runs of kSkip tiles found in growing boxes, for the step cursors (kv_schedule.cuh,
// query_schedule.cuh). Variant::classify over a box of several tiles is conservative, and its
// intervals only narrow on a smaller box, so a box's kSkip holds for every tile in it: a run
// can grow by classifying the next 1, 2, 4, ... tiles past it at once. A causal tail, a
// window's far tiles or a dQ predecessor far away then cost a few classifies, not one a tile.
// Host and device alike (tests/codegen/skipped_runs_test.cpp runs them on the host).
#pragma once

#include "attnjit/common/kernel_config.h"  // ATTNJIT_HD_INLINE

namespace attnjit {

// Tiles [0, run) are known to skip (run >= 1); skipped(from, len) tells whether the box of
// tiles [from, from + len) skips. How many tiles from 0 on skip, at most limit.
template <class Skipped>
ATTNJIT_HD_INLINE int grow_skipped_run(int run, int limit, const Skipped& skipped) {
    while (run < limit) {
        const int len = 2 * run < limit ? run : limit - run;
        if (!skipped(run, len)) break;
        run += len;
    }
    return run;
}

// The first of tiles [0, count) that skipped(i, 1) does not skip; count when there is none.
template <class Skipped>
ATTNJIT_HD_INLINE int first_unskipped(int count, const Skipped& skipped) {
    for (int c = 0; c < count;) {
        if (!skipped(c, 1)) return c;
        c += grow_skipped_run(1, count - c, [&](int from, int len) { return skipped(c + from, len); });
    }
    return count;
}

}  // namespace attnjit
