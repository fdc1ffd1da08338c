// The test sources' precompiled header: common.h and GoogleTest (cmake/Tessera.cmake).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common.h"
