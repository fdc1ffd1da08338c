// The web dashboard's files (src/server/ui/), compiled into the binary.
// ui_assets.cc is generated at build time by cmake/EmbedFiles.cmake from the
// files themselves, so the one `tessera` binary serves the page with no files
// on disk and nothing fetched from the network.
#pragma once

#include <string_view>

namespace tessera::server {

struct UiAsset {
  std::string_view name;          // "index.html", "app.js", ...
  std::string_view content_type;  // from the extension
  std::string_view body;
};

// The asset called `name`, or null.
const UiAsset* FindUiAsset(std::string_view name);

}  // namespace tessera::server
