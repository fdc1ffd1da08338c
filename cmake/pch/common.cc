// Compiles cmake/pch/common.h into the precompiled header the libraries reuse.
