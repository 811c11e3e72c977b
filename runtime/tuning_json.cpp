#include "runtime/tuning_json.h"

namespace attnjit::runtime {
namespace {

// The schedule named by cta_order_name and sm90_grid_name; false for a name neither gives.
bool schedule_from_names(const std::string& order, const std::string& grid, CtaSchedule& out) {
    bool order_known = false, grid_known = false;
    for (int o = kOrderAuto; o <= kOrderLast; ++o)
        if (order == cta_order_name(o)) {
            out.order = o;
            order_known = true;
        }
    for (Sm90Grid g : kSm90Grids)
        if (grid == sm90_grid_name(g)) {
            out.grid = g;
            grid_known = true;
        }
    return order_known && grid_known;
}

}  // namespace

nlohmann::ordered_json tuning_result_json(const TuningResult& r) {
    using nlohmann::ordered_json;
    return ordered_json{{"mainloop", mainloop_kind_name(r.mainloop)},
                        {"tile", {r.tile.block_m, r.tile.block_n, r.tile.warps, r.tile.stages}},
                        {"cta_order", cta_order_name(r.schedule.order)},
                        {"grid", sm90_grid_name(r.schedule.grid)},
                        {"seconds", r.seconds},
                        {"default_seconds", r.default_seconds},
                        {"candidates", r.candidates},
                        {"tuning_seconds", r.tuning_seconds}};
}

std::optional<TuningResult> tuning_result_from_json(const nlohmann::ordered_json& j) {
    try {
        TuningResult r;
        const std::string loop = j.at("mainloop").get<std::string>();
        bool known = false;
        for (MainloopKind m : {MainloopKind::simt, MainloopKind::sm80, MainloopKind::sm90})
            if (loop == mainloop_kind_name(m)) {
                r.mainloop = m;
                known = true;
            }
        const auto& t = j.at("tile");
        if (!known || !t.is_array() || t.size() != 4) return std::nullopt;
        r.tile = TileConfig{t[0].get<int>(), t[1].get<int>(), t[2].get<int>(), t[3].get<int>()};
        // Absent in records written before the schedule was tuned: the kernel's own.
        if (!schedule_from_names(j.value("cta_order", "auto"), j.value("grid", "by_size"), r.schedule))
            return std::nullopt;
        r.seconds = j.at("seconds").get<double>();
        r.default_seconds = j.at("default_seconds").get<double>();
        r.candidates = j.at("candidates").get<int>();
        r.tuning_seconds = j.at("tuning_seconds").get<double>();
        return r;
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

}  // namespace attnjit::runtime
