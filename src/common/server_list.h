// SplitServerList: the addresses of a replicated control plane given as one string, as the CLI
// (--server, TESSERA_SERVER, a context's server:) and the node agent (--server) take them:
// "http://a:7420,http://b:7420,c:7420". Clients talk to one and move to the next on a transport
// failure (agent/api_client.h, cli/api_client.h).
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace tessera {

// The comma-separated parts of `list`, each trimmed of spaces; empty parts are dropped (so "" gives
// none). Order is kept: the first is the one tried first.
std::vector<std::string> SplitServerList(absl::string_view list);

}  // namespace tessera
