#pragma once
// JSON schema -> GBNF. The supported subset (OpenAI structured outputs, plus a little more):
//  - type: object, array, string, number, integer, boolean, null, or a list of them; no type:
//    any JSON value (or an object when `properties` is given)
//  - object: properties (emitted in the schema's order; required ones always, optional ones may
//    be left out), required, additionalProperties (false or absent: only the listed keys; true
//    or a schema: further keys with that schema, after the listed ones)
//  - enum, const (any JSON values), anyOf and oneOf (as alternatives: oneOf's exclusivity is not
//    enforced), allOf with a single member or of object schemas (properties and required
//    merged, in order; a key in two members is an error)
//  - array: items, prefixItems, minItems, maxItems
//  - string: minLength, maxLength, format date, time, date-time, uuid; pattern (the regex
//    subset in regex_gbnf.h; not combined with the others)
//  - integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers, not draft 4's
//    booleans); number: only minimum 0
//  - $ref to #/$defs/NAME or #/definitions/NAME (recursion allowed)
// Annotations are ignored (title, description, examples, default, $schema, $id, $comment,
// strict, deprecated, readOnly, writeOnly). Any other keyword is an error naming it and its
// JSON pointer: number bounds other than minimum 0, multipleOf, patternProperties,
// minProperties/maxProperties, uniqueItems, contains, not, if/then/else, other formats, allOf
// of anything but objects. Keywords of one type (minLength, minimum ...) on a schema without a
// type are errors too, since the grammar could not enforce them.

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "base/result.h"

namespace inferscale::grammar {

// The GBNF of any JSON object (root rule `root`).
std::string json_object_gbnf();

}  // namespace inferscale::grammar
