#pragma once
// Python's operators on Values as Jinja applies them: arithmetic, comparison, membership,
// attribute and item access, slicing, iteration. Type errors throw TemplateError.

#include <memory>
#include <optional>
#include <string_view>

#include "template/value.h"

namespace inferscale::jinja {

Value binary_op(std::string_view op, const Value& a, const Value& b);  // + - * / // % ** ~ < ...
bool contains(const Value& container, const Value& item);              // Python's `in`
bool less_than(const Value& a, const Value& b);                        // Python's <

// Jinja's `object.name` (a method, a dict key, a namespace attribute) and `object[key]`;
// undefined when there is none. Both throw when object itself is undefined.
Value get_attribute(const Value& object, std::string_view name);
Value get_item(const Value& object, const Value& key);
Value get_slice(const Value& object, std::optional<std::int64_t> start,
                std::optional<std::int64_t> stop, std::optional<std::int64_t> step);

// The items a for loop visits, shared with the list they come from where there is one.
// Iterable itself, so `for (const Value& x : iterate(v))` keeps them alive for the loop.
class Items {
  public:
    explicit Items(std::shared_ptr<const ValueList> list) : list_(std::move(list)) {}
    const ValueList& list() const { return *list_; }
    ValueList::const_iterator begin() const { return list_->begin(); }
    ValueList::const_iterator end() const { return list_->end(); }
    std::size_t size() const { return list_->size(); }
    bool empty() const { return list_->empty(); }
    const Value& operator[](std::size_t i) const { return (*list_)[i]; }
    const Value& front() const { return list_->front(); }
    const Value& back() const { return list_->back(); }

  private:
    std::shared_ptr<const ValueList> list_;
};

// List items, dict keys, the characters of a string, nothing for an undefined value.
Items iterate(const Value& v);

// UTF-8 text as a list of code points, one string each.
ValueList utf8_characters(std::string_view text);

}  // namespace inferscale::jinja
