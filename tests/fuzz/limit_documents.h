// Documents at, just past and far past the limits a spec document has or should have
// (docs/spec_format.md): expression depth and size, nesting, operator chains, the number
// of captured tensors and runtime scalars, name length, the document's size, numbers that
// do not fit the field. Each is either accepted or a user error; none may crash.
#pragma once

#include <vector>

#include "corpus.h"

namespace attnjit::fuzz {

std::vector<Document> limit_documents();

}  // namespace attnjit::fuzz
