#pragma once
// The web page's files (apps/server/web/), embedded at build time by embed_web_assets.cmake.

#include <cstddef>
#include <span>

namespace inferscale::server {

struct WebAsset {
    const char* path;  // "/" for index.html, else "/web/<file name>"
    const char* content_type;
    const unsigned char* data;
    std::size_t size;
};

std::span<const WebAsset> web_assets();

}  // namespace inferscale::server
