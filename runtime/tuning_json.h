// One tuning result (runtime/tuning_db.h) as JSON and back: the tuning database's buckets and a
// kernel bundle's recorded choices (runtime/kernel_bundle.h) share the form. For .cpp files only.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "runtime/tuning_db.h"

namespace attnjit::runtime {

nlohmann::ordered_json tuning_result_json(const TuningResult& result);
// nullopt for a value that is not one tuning_result_json writes.
std::optional<TuningResult> tuning_result_from_json(const nlohmann::ordered_json& j);

}  // namespace attnjit::runtime
