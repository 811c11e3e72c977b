#include "codegen/binding.h"

#include "dsl/printer.h"
#include "dsl/visitor.h"

namespace attnjit::codegen {

const char* level_name(Level l) {
    switch (l) {
    case Level::Head: return "head";
    case Level::Row: return "row";
    case Level::Element: return "element";
    }
    return "?";
}

std::ostream& operator<<(std::ostream& os, const Binding& b) {
    return os << b.name << " = " << b.value;
}

const Binding* find_binding(const Bindings& bindings, const std::string& name) {
    for (const auto& b : bindings)
        if (b.name == name) return &b;
    return nullptr;
}

dsl::Expr inline_bindings(const dsl::Expr& e, const Bindings& bindings) {
    if (!e.defined()) return e;
    return dsl::substitute(e, [&](const dsl::Expr& n) -> dsl::Expr {
        auto t = n.as<dsl::Temp>();
        if (!t) return dsl::Expr();
        const Binding* b = find_binding(bindings, t->name);
        return b ? inline_bindings(b->value, bindings) : dsl::Expr();
    });
}

}  // namespace attnjit::codegen
