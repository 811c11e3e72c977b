// The bounded, deterministic corpus of the standalone fuzz run: valid documents made
// from random specs, documents at and past the documented limits, and mutations of both
// and of the seed files. The same seed and count give the same documents on every
// machine, so a CI failure reproduces with the same command.
#pragma once

#include <string>
#include <vector>

namespace attnjit::fuzz {

struct Document {
    std::string name;  // how it was made: "valid#12", "mutant#40 (token swap of valid#3)", a file path
    std::string text;
};

// `count` documents. About a quarter are valid specs (random expressions, dtypes, head
// dims, heads, scales, tensors, scalars, masks; example and modifier specs), a few dozen
// probe the limits (long operator chains, deep nesting, many inputs, a document past
// 1 MiB), and the rest mutate those and `seeds`: bit flips, byte edits, splices, token
// swaps, huge numbers. Nothing here needs a GPU or NVRTC.
std::vector<Document> generate_corpus(unsigned seed, int count, const std::vector<Document>& seeds);

}  // namespace attnjit::fuzz
