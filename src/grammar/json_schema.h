#pragma once
// JSON schema -> GBNF. The supported subset (OpenAI structured outputs, plus a little more):
//  - type: object, array, string, number, integer, boolean, null, or a list of them; no type:
//    any JSON value (or an object when `properties` is given)
//  - object: properties (emitted in the schema's order; required ones always, optional ones may
//    be left out), required, additionalProperties (false or absent: only the listed keys; true
//    or a schema: further keys with that schema, after the listed ones)
//  - enum, const (any JSON values), anyOf and oneOf (as alternatives: oneOf's exclusivity is not
//    enforced), allOf with a single member
//  - array: items, prefixItems, minItems, maxItems
//  - string: minLength, maxLength, format date, time, date-time, uuid
//  - $ref to #/$defs/NAME or #/definitions/NAME (recursion allowed)
// Annotations are ignored (title, description, examples, default, $schema, $id, $comment,
// strict, deprecated, readOnly, writeOnly). Any other keyword is an error naming it and its
// JSON pointer: minimum/maximum (and exclusive ones), multipleOf, pattern, patternProperties,
// minProperties/maxProperties, uniqueItems, contains, not, if/then/else, other formats.

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "base/result.h"

namespace inferscale::grammar {

// The GBNF of any JSON object (root rule `root`).
std::string json_object_gbnf();

}  // namespace inferscale::grammar
