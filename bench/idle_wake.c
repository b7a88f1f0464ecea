/* What two process wake-ups cost on this machine, with nothing else in the
 * way: a parent writes one byte over a socketpair to a child blocked in
 * read(), the child writes it back, the parent reads it (the daemon handing
 * a request line to a pool member and reading its answer, without either's
 * work). Timed back to back and after an idle pause (the idle-daemon rows of
 * issue 13 pay the machine's wake-up from idle on top of the work), with the
 * child on the parent's CPU and on the other one; and a fixed piece of work
 * back to back and after the same pause. Prints
 * "name p50_ms p99_ms" lines. */
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "stats.h"

#define SAMPLES 60

static void pin(int cpu)
{
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        (void)sched_setaffinity(0, sizeof(set), &set);
}

static void echo_child(int fd, int cpu)
{
        pin(cpu);
        char c;
        while (read(fd, &c, 1) == 1)
                if (write(fd, &c, 1) != 1)
                        break;
        _exit(0);
}

/* One round trip's wall time after pause_ms of quiet (0: back to back). */
static uint64_t round_trip(int fd, unsigned pause_ms)
{
        if (pause_ms)
                usleep(pause_ms * 1000U);
        char c = 'x';
        uint64_t t0 = now_ns();
        if (write(fd, &c, 1) != 1 || read(fd, &c, 1) != 1)
                return 0;
        return now_ns() - t0;
}

static void run_row(const char *name, int child_cpu, unsigned pause_ms)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
                perror("socketpair");
                exit(1);
        }
        pid_t pid = fork();
        if (pid == 0) {
                close(sv[0]);
                echo_child(sv[1], child_cpu);
        }
        close(sv[1]);
        pin(0);
        uint64_t t[SAMPLES];
        for (int i = 0; i < 5; i++)
                round_trip(sv[0], 0);
        for (int i = 0; i < SAMPLES; i++)
                t[i] = round_trip(sv[0], pause_ms);
        close(sv[0]);
        waitpid(pid, NULL, 0);
        report(name, t, SAMPLES);
}

/* A fixed piece of work touching WORK_BYTES (about what one request's code
 * and data span): how much slower the same work runs right after an idle
 * pause than back to back (cold caches and TLB, a CPU coming out of idle). */
#define WORK_BYTES (512 * 1024)

static uint64_t work_once(volatile unsigned char *mem, unsigned pause_ms)
{
        if (pause_ms)
                usleep(pause_ms * 1000U);
        uint64_t t0 = now_ns();
        unsigned sum = 0;
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < WORK_BYTES; i += 64)
                        sum += mem[i] + (unsigned)i;
        mem[0] = (unsigned char)sum;
        return now_ns() - t0;
}

/* The same for arithmetic only (no memory beyond registers): what is left
 * of the slow-down after a pause is the CPU's, not the caches'. */
static uint64_t spin_once(volatile unsigned char *mem, unsigned pause_ms)
{
        if (pause_ms)
                usleep(pause_ms * 1000U);
        uint64_t t0 = now_ns();
        uint64_t x = mem[0] + 1;
        for (int i = 0; i < 20000; i++)
                x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        mem[0] = (unsigned char)x;
        return now_ns() - t0;
}

static void work_row(const char *name, unsigned pause_ms, uint64_t (*once)(volatile unsigned char *, unsigned))
{
        static unsigned char mem[WORK_BYTES];
        memset(mem, 1, sizeof(mem));
        uint64_t t[SAMPLES];
        for (int i = 0; i < 5; i++)
                once(mem, 0);
        for (int i = 0; i < SAMPLES; i++)
                t[i] = once(mem, pause_ms);
        report(name, t, SAMPLES);
}

int main(void)
{
        pin(0);
        work_row("work-512k-b2b", 0, work_once);
        work_row("work-512k-paced", 150, work_once);
        work_row("spin-b2b", 0, spin_once);
        work_row("spin-paced", 150, spin_once);
        bool two = sysconf(_SC_NPROCESSORS_ONLN) > 1;
        run_row("wake-same-cpu-b2b", 0, 0);
        run_row("wake-same-cpu-paced", 0, 150);
        if (two) {
                run_row("wake-other-cpu-b2b", 1, 0);
                run_row("wake-other-cpu-paced", 1, 150);
        }
        return 0;
}
