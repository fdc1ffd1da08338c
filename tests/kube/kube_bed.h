// The bed moved to src/kube/testing (library tessera_kube_testing); this forwards to it.
#pragma once

#include "kube/testing/kube_bed.h"  // IWYU pragma: export
