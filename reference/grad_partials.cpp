#include "reference/grad_partials.h"

#include "support/error.h"

namespace attnjit::reference {

Partials zero_partials(const ForwardInputs& in, const std::set<std::string>& wanted) {
    Partials zero;
    for (const auto& name : wanted) {
        auto t = in.tensors.find(name);
        if (t != in.tensors.end()) zero.dtensors.emplace(name, DoubleTensor(t->second.shape()));
        else zero.dscalars[name] = 0.0;
    }
    return zero;
}

void add_score_mod_grads(const codegen::ScoreModGradients& grads, const CapturedReader& reader, dsl::Env& env,
                         double dt, Partials& mine) {
    for (const auto& site : grads.tensors) {
        const auto& load = *site.read.as<dsl::TensorLoad>();
        internal_check(load.indices.size() <= 8) << "reference::backward: rank over 8";
        long long index[8];
        for (size_t r = 0; r < load.indices.size(); ++r) index[r] = dsl::interpret_int(load.indices[r], env);
        int64_t element[8];
        reader.element(site.tensor, index, static_cast<int>(load.indices.size()), element);
        DoubleTensor& dtensor = mine.dtensors.at(site.tensor);
        dtensor.data[static_cast<size_t>(dtensor.offset_of(element))] += dt * dsl::interpret_float(site.partial, env);
    }
    for (const auto& sc : grads.scalars) mine.dscalars.at(sc.scalar) += dt * dsl::interpret_float(sc.partial, env);
}

void merge_partials(std::vector<Partials>& parts, BackwardResult& out) {
    internal_check(!parts.empty()) << "merge_partials: no workers";
    out.dtensors = std::move(parts[0].dtensors);
    out.dscalars = std::move(parts[0].dscalars);
    for (size_t w = 1; w < parts.size(); ++w) {
        for (auto& [name, part] : parts[w].dtensors) {
            auto& total = out.dtensors.at(name).data;
            for (size_t n = 0; n < total.size(); ++n) total[n] += part.data[n];
        }
        for (const auto& [name, value] : parts[w].dscalars) out.dscalars.at(name) += value;
    }
}

}  // namespace attnjit::reference
