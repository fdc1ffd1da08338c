// Compiles cmake/pch/test.h into the precompiled header the tests reuse.
