// The registry of every built-in plugin. Returned by value: callers may add
// their own plugins (the server's binder, the simulator's policies).
#pragma once

#include "sched/framework/registry.h"

namespace tessera::sched {

PluginRegistry DefaultRegistry();

}  // namespace tessera::sched
