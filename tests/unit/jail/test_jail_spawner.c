/* Every test of test_jail.c again, with each jail cloned by the spawner
 * (src/jail/spawner.c, as the daemon does) instead of by the test process,
 * plus the spawner's own tests there. */
#define JAIL_TEST_SPAWNER 1
#include "test_jail.c"
