#pragma once
// MD5 of a byte string as 32 lowercase hex digits (RFC 1321). Only for Mem0's `hash` field, which
// is the MD5 of a memory's text: an identifier clients compare, not a security measure.

#include <string>
#include <string_view>

namespace inferscale::server {

std::string md5_hex(std::string_view bytes);

}  // namespace inferscale::server
