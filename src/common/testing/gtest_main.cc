// The main of every GoogleTest binary (cmake/Tessera.cmake links it instead of gtest_main):
// a run in which a test was skipped (GTEST_SKIP: a shared trace or a tool absent) exits 77,
// which ctest reports as skipped (SKIP_RETURN_CODE), not passed. A failure still exits 1 and
// fails, skipped tests or not. Binaries whose skippable tests sit beside others register those
// tests as a ctest entry of their own (tessera_test's SPLIT), so a skip hides nothing that ran.
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  if (rc == 0 && unit.skipped_test_count() > 0) {
    std::fprintf(stderr, "%d test(s) skipped: reported to ctest as skipped (exit 77)\n",
                 unit.skipped_test_count());
    return 77;
  }
  return rc;
}
