// The functions every template sees: Jinja's namespace, range and dict, and transformers'
// raise_exception and strftime_now.

#include <cstdlib>
#include <ctime>

#include "template/builtins.h"
#include "template/error.h"

namespace inferscale::jinja {
namespace {

Value make_namespace(CallArgs& args) {
    auto attributes = std::make_shared<ValueDict>();
    for (const Value& initial : args.positional) {
        if (!initial.is_dict()) fail("namespace() takes a mapping or keyword arguments");
        for (const auto& [k, v] : initial.as_dict().entries()) attributes->set(k, v);
    }
    for (const auto& [k, v] : args.named) attributes->set(k, v);
    return Namespace{std::move(attributes)};
}

Value make_dict(CallArgs& args) {
    ValueDict d;
    for (const Value& initial : args.positional)
        if (initial.is_dict())
            for (const auto& [k, v] : initial.as_dict().entries()) d.set(k, v);
    for (const auto& [k, v] : args.named) d.set(k, v);
    return d;
}

Value range(CallArgs& args) {
    const auto& p = args.positional;
    if (p.empty() || p.size() > 3) fail("range() takes 1 to 3 arguments");
    for (const Value& v : p)
        if (!v.is_int()) fail("range() takes integers");
    const std::int64_t start = p.size() > 1 ? p[0].as_int() : 0;
    const std::int64_t stop = p.size() > 1 ? p[1].as_int() : p[0].as_int();
    const std::int64_t step = p.size() > 2 ? p[2].as_int() : 1;
    if (step == 0) fail("range() step must not be zero");
    // Jinja's sandbox caps range() at 100000 items.
    constexpr std::int64_t kMaxItems = 100000;
    // 128-bit: the span of two 64-bit ends, or a step of INT64_MIN, overflows 64 bits.
    const __int128 span = step > 0 ? __int128{stop} - start : __int128{start} - stop;
    const __int128 stride = step > 0 ? __int128{step} : -__int128{step};
    const __int128 count = span > 0 ? (span + stride - 1) / stride : 0;
    if (count > kMaxItems) fail("range() is limited to " + std::to_string(kMaxItems) + " items");
    ValueList out;
    for (std::int64_t k = 0; k < count; ++k)
        out.emplace_back(static_cast<std::int64_t>(start + __int128{k} * step));
    return out;
}

Value raise_exception(CallArgs& args) {
    fail(args.positional.empty() ? "raise_exception" : to_str(args.positional[0]));
}

Value strftime_now(CallArgs& args) {
    if (args.positional.empty()) fail("strftime_now() takes a format");
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buf[256];
    const std::size_t n =
        std::strftime(buf, sizeof buf, to_str(args.positional[0]).c_str(), &local);
    return std::string(buf, n);
}

ValueDict make_globals() {
    ValueDict g;
    g.set("namespace", Callable{"namespace", make_namespace});
    g.set("dict", Callable{"dict", make_dict});
    g.set("range", Callable{"range", range});
    g.set("raise_exception", Callable{"raise_exception", raise_exception});
    g.set("strftime_now", Callable{"strftime_now", strftime_now});
    return g;
}

}  // namespace

const ValueDict& global_functions() {
    static const ValueDict globals = make_globals();
    return globals;
}

}  // namespace inferscale::jinja
