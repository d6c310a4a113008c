// Test entry point. A test binary may re-enter itself as a child process (cache race tests):
// FLASHJIT_TEST_CHILD names the role, and the child runs that role instead of the suite.
#include <gtest/gtest.h>

#include "support/child_roles.hpp"

int main(int argc, char** argv) {
  if (int rc = 0; flashjit::testing::run_child_role_if_requested(argc, argv, &rc)) return rc;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
