// GET / and GET /web/<file>: the web page (apps/server/web/), served without a key; the page
// asks for one and sends it with every API call, so it shows only what that key may see.

#include <httplib.h>

#include <string>

#include "apps/server/http_server.h"
#include "apps/server/web_assets.h"

namespace inferscale::server {

void add_web_page_routes(httplib::Server& http) {
    for (const WebAsset& asset : web_assets()) {
        http.Get(asset.path, [&asset](const httplib::Request&, httplib::Response& res) {
            res.set_header("Cache-Control", "no-cache");
            res.set_header("X-Content-Type-Options", "nosniff");
            res.set_content(reinterpret_cast<const char*>(asset.data), asset.size,
                            asset.content_type);
        });
    }
}

}  // namespace inferscale::server
