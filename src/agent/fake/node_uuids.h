#pragma once

#include <string>
#include <string_view>

namespace tessera::agent {

// A fake GPU config (deploy/fake-gpus/*.yaml) made one node's own: every GPU and MIG UUID in
// `config_text` ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", "MIG-...") gets its last 12 hex
// digits replaced by a hash of `node` and the UUID, so that several fake nodes started from one
// file (`tessera up`) report distinct GPUs, as real machines do. Deterministic (the same node
// gets the same UUIDs on every run); the rest of the text is unchanged.
std::string WithNodeUuids(std::string_view config_text, std::string_view node);

}  // namespace tessera::agent
