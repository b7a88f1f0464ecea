/* The least any daemon could answer a stateless execution in on this
 * machine, with the guest in a process of its own: a single-threaded HTTP
 * server (one keep-alive client) that hands each POST to a booted kernel of
 * the daemon's (src/runtimes/kernels, started without a jail) as the
 * daemon's request line, and answers with the kernel's line as the body. No
 * JSON parsing, routing, pools, cgroups, jail or accounting: what is left is
 * HTTP, the two hand-offs to the kernel and back, and the interpreter's own
 * work. After each answer it kills that kernel and boots the next one (a
 * once-mode kernel answers once) before it reads again, so a `GET /ready`
 * sent after an answer returns once the next kernel is up.
 *
 * bench/run.py section 1 times it after the same idle pause as the daemon's
 * idle row ("ideal-paced"): a row that misses while this one meets its
 * target misses by the daemon's own path; a row whose ideal misses is bound
 * by the machine and the interpreter.
 *
 *     ideal_server CWD WARMUP_LINE REQUEST_LINE ARGV...
 *
 * The kernel gets the socket on fd 3 (as in a jail), CWD as its cwd and
 * workspace root. WARMUP_LINE ("" for none) is sent once after its ready
 * line, as the daemon warms a template's kernel. Prints the port, then
 * serves one connection until it closes. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/io.h"

struct kernel {
        pid_t pid;
        int sock;
};

static char **kernel_argv;
static const char *kernel_cwd, *warmup_line, *request_line;

static void die(const char *what)
{
        perror(what);
        exit(1);
}

static void write_all_or_die(int fd, const char *buf, size_t len)
{
        if (write_all(fd, buf, len) < 0)
                die("write");
}

/* One line from the kernel, without its newline. */
static size_t read_line(int fd, char *buf, size_t max)
{
        size_t len = 0;
        while (len == 0 || buf[len - 1] != '\n') {
                ssize_t n = read(fd, buf + len, max - 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0 || len + (size_t)n >= max - 1)
                        die("kernel answer");
                len += (size_t)n;
        }
        buf[--len] = '\0';
        return len;
}

static void exec_kernel(int sock)
{
        if (dup2(sock, 3) < 0 || chdir(kernel_cwd) < 0)
                _exit(127);
        char root[4200];
        snprintf(root, sizeof(root), "SANDBOX_WORKSPACE_ROOT=%s", kernel_cwd);
        char *envp[] = { "PATH=/usr/bin:/bin", "LANG=C.UTF-8", root, NULL };
        execve(kernel_argv[0], kernel_argv, envp);
        _exit(127);
}

static void boot(struct kernel *k)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
                die("socketpair");
        k->pid = fork();
        if (k->pid < 0)
                die("fork");
        if (k->pid == 0) {
                close(sv[0]);
                exec_kernel(sv[1]);
        }
        close(sv[1]);
        k->sock = sv[0];
        char line[65536];
        read_line(k->sock, line, sizeof(line)); /* ready */
        if (*warmup_line) {
                write_all_or_die(k->sock, warmup_line, strlen(warmup_line));
                read_line(k->sock, line, sizeof(line));
        }
}

static void retire(struct kernel *k)
{
        kill(k->pid, SIGKILL);
        close(k->sock);
        waitpid(k->pid, NULL, 0);
}

/* Reads one request (head and Content-Length body) into buf; 0 at EOF. */
static size_t read_request(int fd, char *buf, size_t max)
{
        size_t len = 0;
        char *end = NULL;
        while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
                ssize_t n = read(fd, buf + len, max - 1 - len);
                if (n <= 0)
                        return 0;
                len += (size_t)n;
        }
        buf[len] = '\0';
        size_t head = (size_t)(end + 4 - buf), body = 0;
        for (char *h = strstr(buf, "\r\n"); h && h < end; h = strstr(h + 2, "\r\n"))
                if (strncasecmp(h + 2, "Content-Length:", 15) == 0)
                        body = strtoul(h + 17, NULL, 10);
        while (len < head + body) {
                ssize_t n = read(fd, buf + len, max - 1 - len);
                if (n <= 0)
                        return 0;
                len += (size_t)n;
        }
        return len;
}

static void reply(int fd, const char *body, size_t len)
{
        char out[70000];
        int n = snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%.*s",
                         len, (int)len, body);
        write_all_or_die(fd, out, (size_t)n);
}

static int listen_loopback(void)
{
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t alen = sizeof(a);
        if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 1) < 0 ||
            getsockname(s, (struct sockaddr *)&a, &alen) < 0)
                die("listen");
        printf("%d\n", ntohs(a.sin_port));
        fflush(stdout);
        return s;
}

int main(int argc, char **argv)
{
        if (argc < 5) {
                fprintf(stderr, "usage: ideal_server CWD WARMUP_LINE REQUEST_LINE ARGV...\n");
                return 2;
        }
        kernel_cwd = argv[1];
        warmup_line = argv[2];
        request_line = argv[3];
        kernel_argv = argv + 4;
        int s = listen_loopback();
        struct kernel k;
        boot(&k);
        int c = accept(s, NULL, NULL), one = 1;
        if (c < 0)
                die("accept");
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        static char req[65536], answer[65536];
        while (read_request(c, req, sizeof(req))) {
                if (strncmp(req, "POST ", 5) != 0) {
                        reply(c, "{\"ready\":true}", 14);
                        continue;
                }
                write_all_or_die(k.sock, request_line, strlen(request_line));
                size_t len = read_line(k.sock, answer, sizeof(answer));
                reply(c, answer, len);
                retire(&k);
                boot(&k);
        }
        retire(&k);
        return 0;
}
