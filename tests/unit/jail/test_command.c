/* The wire format of a deferred jail's command (src/jail/command.c): what
 * the daemon encodes decodes to the same argv, envp and cwd, and a body
 * that is not exactly that is refused (the jail's child parses it). */
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/internal.h"
#include "tap.h"

/* The header's counts, as the encoder wrote them. */
static void counts(const char *msg, uint32_t *argc, uint32_t *envc)
{
        memcpy(argc, msg + 8, 4);
        memcpy(envc, msg + 12, 4);
}

TEST(command_round_trip)
{
        const char *argv[] = { "/bin/bash", "-c", "echo \"$A\"", NULL };
        const char *envp[] = { "A=1", "B=x=y z", NULL };
        _cleanup_free_ char *msg = NULL;
        size_t len = 0;
        ASSERT_OK(jail_cmd_encode(argv, envp, "/tmp", &msg, &len));
        uint32_t argc, envc;
        counts(msg, &argc, &envc);
        ASSERT_EQ(argc, 3);
        ASSERT_EQ(envc, 2);
        const char *a[JAIL_MAX_ARGS + 1], *e[JAIL_MAX_ENV + 1], *cwd = "unset";
        ASSERT_OK(jail_cmd_decode(msg + 16, len - 16, argc, envc, a, e, &cwd));
        for (int i = 0; i < 3; i++)
                ASSERT_STREQ(a[i], argv[i]);
        ASSERT_NULL(a[3]);
        ASSERT_STREQ(e[0], "A=1");
        ASSERT_STREQ(e[1], "B=x=y z");
        ASSERT_NULL(e[2]);
        ASSERT_STREQ(cwd, "/tmp");
}

TEST(command_default_cwd_and_empty_env)
{
        const char *argv[] = { "/bin/true", NULL }, *none[] = { NULL };
        _cleanup_free_ char *msg = NULL;
        size_t len = 0;
        ASSERT_OK(jail_cmd_encode(argv, none, NULL, &msg, &len));
        const char *a[JAIL_MAX_ARGS + 1], *e[JAIL_MAX_ENV + 1], *cwd = "unset";
        ASSERT_OK(jail_cmd_decode(msg + 16, len - 16, 1, 0, a, e, &cwd));
        ASSERT_NULL(cwd);
        ASSERT_NULL(e[0]);
}

TEST(command_read_from_a_pipe)
{
        const char *argv[] = { "/bin/sh", "-c", "x", NULL }, *envp[] = { "K=V", NULL };
        _cleanup_free_ char *msg = NULL;
        size_t len = 0;
        ASSERT_OK(jail_cmd_encode(argv, envp, "/w", &msg, &len));
        int p[2];
        ASSERT_OK(pipe(p));
        ASSERT_OK(write_all(p[1], msg, len));
        close(p[1]);
        const char *a[JAIL_MAX_ARGS + 1], *e[JAIL_MAX_ENV + 1], *cwd = NULL;
        ASSERT_OK(jail_cmd_read(p[0], a, e, &cwd));
        ASSERT_STREQ(a[2], "x");
        ASSERT_STREQ(e[0], "K=V");
        ASSERT_STREQ(cwd, "/w");
        /* EOF before a whole header: -EIO (the child then just exits) */
        ASSERT_EQ(jail_cmd_read(p[0], a, e, &cwd), -EIO);
        close(p[0]);
        /* a header that is not ours */
        ASSERT_OK(pipe(p));
        msg[0] ^= 1;
        ASSERT_OK(write_all(p[1], msg, len));
        close(p[1]);
        ASSERT_EQ(jail_cmd_read(p[0], a, e, &cwd), -EPROTO);
        close(p[0]);
}

TEST(command_refuses_malformed_bodies)
{
        const char *a[JAIL_MAX_ARGS + 1], *e[JAIL_MAX_ENV + 1], *cwd;
        static const char ok[] = "/bin/true\0A=1\0/w"; /* + the final NUL */
        ASSERT_OK(jail_cmd_decode(ok, sizeof(ok), 1, 1, a, e, &cwd));
        /* fewer strings than counted, a missing final NUL, trailing bytes */
        ASSERT_EQ(jail_cmd_decode(ok, sizeof(ok), 2, 1, a, e, &cwd), -EPROTO);
        ASSERT_EQ(jail_cmd_decode(ok, sizeof(ok) - 1, 1, 1, a, e, &cwd), -EPROTO);
        ASSERT_EQ(jail_cmd_decode(ok, sizeof(ok), 1, 0, a, e, &cwd), -EPROTO);
        /* counts beyond the arrays, or no program */
        ASSERT_EQ(jail_cmd_decode(ok, sizeof(ok), JAIL_MAX_ARGS + 1, 0, a, e, &cwd), -E2BIG);
        ASSERT_EQ(jail_cmd_decode(ok, sizeof(ok), 1, JAIL_MAX_ENV + 1, a, e, &cwd), -E2BIG);
        ASSERT_EQ(jail_cmd_decode(ok, sizeof(ok), 0, 1, a, e, &cwd), -E2BIG);
        /* and the encoder refuses what the decoder would */
        const char *none[] = { NULL }, *many[JAIL_MAX_ARGS + 2];
        for (int i = 0; i <= JAIL_MAX_ARGS; i++)
                many[i] = "x";
        many[JAIL_MAX_ARGS + 1] = NULL;
        char *msg = NULL;
        size_t len;
        ASSERT_EQ(jail_cmd_encode(none, none, NULL, &msg, &len), -E2BIG);
        ASSERT_EQ(jail_cmd_encode(many, none, NULL, &msg, &len), -E2BIG);
        ASSERT_NULL(msg);
}
