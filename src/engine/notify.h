/* Refused syscalls, counted and logged (issue 10 row 15). Every jailed
 * workload installs the seccomp policy's notify program with a listener
 * (seccomp_prog_apply_listener) and hands the listener to the daemon before
 * any guest code runs. One daemon thread answers every notification with
 * the errno the policy gives (seccomp_prog_refusal), counts it for the
 * process, and logs at most NOTIFY_LOG_PER_S lines a second. Internal to
 * src/engine. */
#pragma once

#include <stdint.h>

struct seccomp_prog;
struct notifier;
struct notify_watch;

/* Logged refusals per second, all jails together; the rest are counted
 * and summed up in one line once logging resumes. */
#define NOTIFY_LOG_PER_S 10
/* Each answer costs the daemon's thread ~10 us. Past this many refusals a
 * process's listener is closed: its later refusals fail with ENOSYS in the
 * kernel, uncounted (the count then reads "at least"), and one guest
 * looping on refused calls cannot keep the thread busy for more than ~1 s. */
#define NOTIFY_MAX_PER_PROC 100000

/* Starts the answering thread for prog (kept, not copied). 0 or -errno. */
int notifier_start(const struct seccomp_prog *prog, struct notifier **ret);
/* Stops and joins the thread, closes every listener still watched. */
void notifier_free(struct notifier *n);

/* Watches listener_fd (taken, also on failure) for one jailed process;
 * label names it in the log ("lang=python pid=1234"). 0 or -errno. */
int notifier_watch(struct notifier *n, int listener_fd, const char *label, struct notify_watch **ret);
/* Refusals answered so far for this process. */
uint64_t notify_watch_count(const struct notify_watch *w);
/* Stops watching and closes the listener (NULL-safe). A workload still
 * alive then sees ENOSYS for every refused syscall. */
void notifier_unwatch(struct notifier *n, struct notify_watch *w);

/* Receives one fd sent on sock as one byte tag with SCM_RIGHTS: the
 * seccomp listener ('N', NOTIFY_TAG) or a terminal master ('T'). Waits up
 * to timeout_ms first (0: the message must be queued already). Returns the
 * fd (close-on-exec) or -errno (-EPROTO for another message). */
#define NOTIFY_TAG 'N'
int notify_recv_tagged_fd(int sock, char tag, int timeout_ms);
