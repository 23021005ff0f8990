#pragma once
// GPT-2's byte-to-unicode mapping: every byte becomes a printable code point so byte-level BPE
// vocabularies are plain strings. Printable Latin-1 bytes map to themselves, the rest to 256+.

#include <string>
#include <string_view>

namespace inferscale::tokenizer {

// Maps each byte of `bytes` to its code point, UTF-8 encoded.
std::string byte_level_encode(std::string_view bytes);

// Inverse of byte_level_encode for one token. Returns false (out untouched) when the token has a
// code point outside the map; HF then keeps the token's own UTF-8 bytes.
bool byte_level_decode(std::string_view token, std::string* out);

}  // namespace inferscale::tokenizer
