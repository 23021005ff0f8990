#pragma once
// Value: what a Jinja expression evaluates to, with Python's semantics as transformers' chat
// templates see them: undefined, None, bool, int, float, str, list, dict (insertion-ordered,
// string keys), a namespace (the one mutable kind) and callables (macros, methods, globals).
// Lists and dicts are shared and never mutated after construction, so copies are cheap.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace inferscale::jinja {

class Value;
using ValueList = std::vector<Value>;

class ValueDict {
  public:
    const Value* find(std::string_view key) const;
    void set(std::string key, Value value);  // replaces an existing key in place
    const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
    std::size_t size() const;  // defined below Value: clang needs Value complete here

  private:
    std::vector<std::pair<std::string, Value>> entries_;
};

// Positional and keyword arguments of a call, filter or test.
struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> named;

    // The argument at `index` or named `name`; nullptr when absent.
    const Value* get(std::size_t index, std::string_view name) const;
};

struct Callable {
    std::string name;
    std::function<Value(CallArgs&)> call;  // errors are thrown as TemplateError (error.h)
};

struct Undefined {
    std::string name;  // what was looked up, for error messages
};
struct None {};
struct Namespace {
    std::shared_ptr<ValueDict> attributes;
};

class Value {
  public:
    using Storage = std::variant<Undefined, None, bool, std::int64_t, double, std::string,
                                 std::shared_ptr<const ValueList>, std::shared_ptr<const ValueDict>,
                                 Namespace, std::shared_ptr<const Callable>>;

    Value() : v_(Undefined{}) {}
    Value(None) : v_(None{}) {}                         // NOLINT: implicit by design
    Value(bool b) : v_(b) {}                            // NOLINT
    Value(std::int64_t i) : v_(i) {}                    // NOLINT
    Value(int i) : v_(static_cast<std::int64_t>(i)) {}  // NOLINT
    Value(double d) : v_(d) {}                          // NOLINT
    Value(std::string s) : v_(std::move(s)) {}          // NOLINT
    Value(const char* s) : v_(std::string(s)) {}        // NOLINT
    Value(ValueList list) : v_(std::make_shared<const ValueList>(std::move(list))) {}  // NOLINT
    Value(ValueDict dict) : v_(std::make_shared<const ValueDict>(std::move(dict))) {}  // NOLINT
    Value(Namespace ns) : v_(std::move(ns)) {}                                         // NOLINT
    Value(Callable fn) : v_(std::make_shared<const Callable>(std::move(fn))) {}        // NOLINT
    static Value undefined(std::string name) {
        Value v;
        v.v_ = Undefined{std::move(name)};
        return v;
    }

    bool is_undefined() const { return v_.index() == 0; }
    bool is_none() const { return v_.index() == 1; }
    bool is_bool() const { return v_.index() == 2; }
    bool is_int() const { return v_.index() == 3; }
    bool is_float() const { return v_.index() == 4; }
    bool is_number() const { return is_int() || is_float(); }  // bool excluded, as Jinja's test
    bool is_string() const { return v_.index() == 5; }
    bool is_list() const { return v_.index() == 6; }
    bool is_dict() const { return v_.index() == 7; }
    bool is_namespace() const { return v_.index() == 8; }
    bool is_callable() const { return v_.index() == 9; }

    // The held value; a value of another type fails the render ("expected an integer, got
    // 'str'"), as a template may pass anything anywhere.
    bool as_bool() const { return held<2>("a boolean"); }
    std::int64_t as_int() const { return held<3>("an integer"); }
    double as_float() const { return held<4>("a float"); }
    double as_number() const;  // int, float or bool as a double
    const std::string& as_string() const { return held<5>("a string"); }
    const ValueList& as_list() const { return *held<6>("a list"); }
    const std::shared_ptr<const ValueList>& list_ptr() const { return held<6>("a list"); }
    const ValueDict& as_dict() const { return *held<7>("a dict"); }
    ValueDict& namespace_attributes() const { return *held<8>("a namespace").attributes; }
    const Callable& as_callable() const { return *held<9>("a callable"); }
    const std::string& undefined_name() const { return held<0>("undefined").name; }

    bool truthy() const;                        // Python's bool()
    std::string type_name() const;              // Python's type name, for error messages
    bool operator==(const Value& other) const;  // Python's ==

  private:
    template <std::size_t I>
    const std::variant_alternative_t<I, Storage>& held(const char* what) const {
        if (v_.index() != I) wrong_type(what);
        return *std::get_if<I>(&v_);
    }
    [[noreturn]] void wrong_type(const char* what) const;

    Storage v_;
};

// Python's str() of a value (an undefined value prints as nothing; list items as repr()).
std::string to_str(const Value& v);
void append_str(std::string& out, const Value& v);

// Python's repr of a float: the shortest text that reads back the same number.
std::string float_repr(double d);

// The number of Unicode code points in UTF-8 text (Python's len of a str).
std::size_t utf8_length(std::string_view text);

inline std::size_t ValueDict::size() const { return entries_.size(); }

}  // namespace inferscale::jinja
