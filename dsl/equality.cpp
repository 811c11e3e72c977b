#include "dsl/equality.h"

#include <cstring>

namespace attnjit::dsl {

uint64_t hash_combine(uint64_t h, uint64_t v) {
    // splitmix64 finaliser over the combination: cheap, well distributed, deterministic.
    uint64_t x = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t hash_string(const std::string& s) {
    uint64_t h = 1469598103934665603ULL;  // FNV-1a
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
    return h;
}

bool equal(const Expr& a, const Expr& b) {
    if (a.same_as(b)) return true;
    if (!a.defined() || !b.defined()) return false;
    if (a.kind() != b.kind() || a.type() != b.type()) return false;
    switch (a.kind()) {
    case NodeKind::Const: {
        auto x = a.as<Const>(), y = b.as<Const>();
        return x->type == Type::Float ? std::memcmp(&x->f, &y->f, sizeof(double)) == 0 : x->i == y->i;
    }
    case NodeKind::Var: return a.as<Var>()->var == b.as<Var>()->var;
    case NodeKind::ScalarParam: return a.as<ScalarParam>()->name == b.as<ScalarParam>()->name;
    case NodeKind::Temp: return a.as<Temp>()->name == b.as<Temp>()->name;
    case NodeKind::TensorLoad: {
        auto x = a.as<TensorLoad>(), y = b.as<TensorLoad>();
        if (x->name != y->name || x->dtype != y->dtype || x->indices.size() != y->indices.size())
            return false;
        for (size_t i = 0; i < x->indices.size(); ++i)
            if (!equal(x->indices[i], y->indices[i])) return false;
        return true;
    }
    case NodeKind::Unary: {
        auto x = a.as<Unary>(), y = b.as<Unary>();
        return x->op == y->op && equal(x->a, y->a);
    }
    case NodeKind::Binary: {
        auto x = a.as<Binary>(), y = b.as<Binary>();
        return x->op == y->op && equal(x->a, y->a) && equal(x->b, y->b);
    }
    case NodeKind::Select: {
        auto x = a.as<Select>(), y = b.as<Select>();
        return equal(x->cond, y->cond) && equal(x->t, y->t) && equal(x->f, y->f);
    }
    case NodeKind::Cast: return equal(a.as<Cast>()->a, b.as<Cast>()->a);
    }
    return false;
}

uint64_t structural_hash(const Expr& e) {
    if (!e.defined()) return 0x5bd1e995ULL;
    uint64_t h = hash_combine(static_cast<uint64_t>(e.kind()) + 1, static_cast<uint64_t>(e.type()));
    switch (e.kind()) {
    case NodeKind::Const: {
        auto c = e.as<Const>();
        uint64_t bits;
        if (c->type == Type::Float) std::memcpy(&bits, &c->f, sizeof bits);
        else bits = static_cast<uint64_t>(c->i);
        return hash_combine(h, bits);
    }
    case NodeKind::Var: return hash_combine(h, static_cast<uint64_t>(e.as<Var>()->var));
    case NodeKind::ScalarParam: return hash_combine(h, hash_string(e.as<ScalarParam>()->name));
    case NodeKind::Temp: return hash_combine(h, hash_string(e.as<Temp>()->name));
    case NodeKind::TensorLoad: {
        auto t = e.as<TensorLoad>();
        h = hash_combine(h, hash_string(t->name));
        h = hash_combine(h, static_cast<uint64_t>(t->dtype));
        for (const auto& i : t->indices) h = hash_combine(h, structural_hash(i));
        return h;
    }
    case NodeKind::Unary: {
        auto u = e.as<Unary>();
        return hash_combine(hash_combine(h, static_cast<uint64_t>(u->op)), structural_hash(u->a));
    }
    case NodeKind::Binary: {
        auto b = e.as<Binary>();
        h = hash_combine(h, static_cast<uint64_t>(b->op));
        return hash_combine(hash_combine(h, structural_hash(b->a)), structural_hash(b->b));
    }
    case NodeKind::Select: {
        auto s = e.as<Select>();
        h = hash_combine(h, structural_hash(s->cond));
        return hash_combine(hash_combine(h, structural_hash(s->t)), structural_hash(s->f));
    }
    case NodeKind::Cast: return hash_combine(h, structural_hash(e.as<Cast>()->a));
    }
    return h;
}

}  // namespace attnjit::dsl
