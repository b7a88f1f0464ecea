/* Runner for tap.h: forks each registered test with a timeout. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

#define TAP_MAX 512
#define TAP_TIMEOUT_S 30

static struct {
        const char *name;
        tap_fn fn;
} tests[TAP_MAX];
static int ntests;

void tap_register(const char *name, tap_fn fn)
{
        if (ntests < TAP_MAX)
                tests[ntests++] = (typeof(tests[0])){ name, fn };
}

static int run_one(int i)
{
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
                alarm(TAP_TIMEOUT_S);
                tests[i].fn();
                exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        fprintf(stderr, "# killed by signal %d\n", WTERMSIG(status));
        return 1;
}

int main(int argc, char **argv)
{
        int passed = 0, failed = 0, skipped = 0;
        printf("1..%d\n", ntests);
        for (int i = 0; i < ntests; i++) {
                if (argc > 1 && strstr(tests[i].name, argv[1]) == NULL) {
                        printf("ok %d - %s # SKIP filtered\n", i + 1, tests[i].name);
                        skipped++;
                        continue;
                }
                int rc = run_one(i);
                if (rc == 0) {
                        printf("ok %d - %s\n", i + 1, tests[i].name);
                        passed++;
                } else if (rc == 77) {
                        printf("ok %d - %s # SKIP\n", i + 1, tests[i].name);
                        skipped++;
                } else {
                        printf("not ok %d - %s\n", i + 1, tests[i].name);
                        failed++;
                }
        }
        printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
        return failed ? 1 : 0;
}
