// libFuzzer target: `tessera apply`'s manifest front end (cli/yaml_json.h): YAML or JSON text,
// one or many documents, parsed with its limits (size, values with aliases expanded, depth,
// duplicate keys, UTF-8). Any input must give objects or a clean error, never a crash or a
// sanitizer report; and what it gives must survive the round trip `-o yaml` makes: ToYaml of an
// object parses back to the same object. Built by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/yaml_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto manifests = tessera::cli::ParseManifestsWithLines(text);
  if (!manifests.ok()) return 0;
  for (const auto& m : *manifests) {
    (void)m.LineOf("spec.groups[0].count");
    const std::string yaml = tessera::cli::ToYaml(m.object);
    auto again = tessera::cli::ParseManifests(yaml);
    if (!again.ok() || again->size() != 1 || (*again)[0] != m.object) {
      // Objects only: a round trip that loses or changes a value is a bug in ToYaml or the parser.
      if (m.object.is_object()) {
        fprintf(stderr, "round trip changed the object:\n%s\nas YAML:\n%s\nread back: %s\n",
                m.object.dump().c_str(), yaml.c_str(),
                again.ok() ? (again->empty() ? "nothing" : (*again)[0].dump().c_str())
                           : std::string(again.status().message()).c_str());
        abort();
      }
    }
  }
  return 0;
}
