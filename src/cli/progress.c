/* Progress bars on stderr: one line redrawn with '\r', only when stderr is
 * a terminal (and not --quiet), so pipes and logs never see them. */
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "base/time.h"
#include "cli/cli.h"

#define PROGRESS_REDRAW_MS 100

void cli_progress_start(struct cli_progress *p, bool on, const char *label, uint64_t total)
{
        memset(p, 0, sizeof(*p));
        p->on = on;
        p->total = total;
        p->start_ms = now_ms();
        snprintf(p->label, sizeof(p->label), "%s", label);
}

/* "1.5 MiB" */
static void human(uint64_t n, char *out, size_t len)
{
        static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
        double v = (double)n;
        size_t u = 0;
        while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0]))
                v /= 1024, u++;
        if (u == 0)
                snprintf(out, len, "%llu B", (unsigned long long)n);
        else
                snprintf(out, len, "%.1f %s", v, units[u]);
}

static int term_width(void)
{
        struct winsize ws;
        if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
                return ws.ws_col;
        return 80;
}

static void draw(struct cli_progress *p, uint64_t now)
{
        char done[32], total[32], rate[32], eta[32] = "", bar[64] = "";
        double secs = (double)(now - p->start_ms) / 1000.0;
        double bps = secs > 0.05 ? (double)p->done / secs : 0;
        human(p->done, done, sizeof(done));
        human((uint64_t)bps, rate, sizeof(rate));
        if (p->total > 0) {
                uint64_t d = p->done < p->total ? p->done : p->total;
                int width = term_width() - 60 - (int)strlen(p->label);
                width = width < 10 ? 10 : width > 40 ? 40 : width;
                int fill = (int)((double)d * width / (double)p->total);
                for (int i = 0; i < width; i++)
                        bar[i] = i < fill ? '#' : '.';
                bar[width] = '\0';
                human(p->total, total, sizeof(total));
                if (bps > 0 && d < p->total) {
                        unsigned long left = (unsigned long)((double)(p->total - d) / bps);
                        snprintf(eta, sizeof(eta), " ETA %lu:%02lu", left / 60, left % 60);
                }
                fprintf(stderr, "\r\033[K%s [%s] %3d%% %s/%s %s/s%s", p->label, bar, (int)(100.0 * d / p->total), done,
                        total, rate, eta);
        } else {
                fprintf(stderr, "\r\033[K%s %s %s/s", p->label, done, rate);
        }
        fflush(stderr);
        p->drawn_ms = now;
        p->drawn = true;
}

void cli_progress_update(struct cli_progress *p, uint64_t done, uint64_t total)
{
        p->done = done;
        if (total > 0)
                p->total = total;
        uint64_t now = now_ms();
        if (p->on && (!p->drawn || now - p->drawn_ms >= PROGRESS_REDRAW_MS))
                draw(p, now);
}

void cli_progress_add(struct cli_progress *p, uint64_t n)
{
        cli_progress_update(p, p->done + n, 0);
}

void cli_progress_fn(void *cls, uint64_t done, uint64_t total)
{
        cli_progress_update(cls, done, total);
}

void cli_progress_end(struct cli_progress *p)
{
        if (!p->on)
                return;
        if (p->total > 0 && p->done < p->total)
                p->total = p->done; /* what really moved (a file that shrank, a failure) */
        draw(p, now_ms());
        fputc('\n', stderr);
        p->on = false;
}
