/* cpus and memory of POST /sandbox/create (sandbox_limits.h). Bounds: a
 * tenth of a CPU up to every CPU of the host (a CFS quota above that would
 * mean nothing); 16 MiB (less does not start an interpreter) up to half the
 * host's RAM (one sandbox cannot take the host). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/controller/sandbox_limits.h"

static uint64_t host_cpu_millis(void)
{
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        return (uint64_t)(n > 0 ? n : 1) * 1000;
}

static uint64_t host_memory_max(void)
{
        long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
        return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size / 2 : CTL_MEMORY_MIN;
}

/* A plain decimal ("2", "0.5") with its suffix left in *end; -1 when none. */
static double decimal(const char *s, char **end)
{
        if (!(*s >= '0' && *s <= '9') && *s != '.')
                return -1;
        double v = strtod(s, end);
        return *end == s || !isfinite(v) ? -1 : v;
}

int ctl_parse_cpus(json_t *v, uint64_t *ret, const char **ret_msg)
{
        static const char msg[] = "cpus must be a number or a string like \"2\", \"0.5\" or \"500m\", "
                                  "from 0.1 to the host's CPUs";
        *ret = 0;
        if (!v || json_is_null(v))
                return 0;
        double millis = -1;
        if (json_is_number(v)) {
                millis = json_number_value(v) * 1000;
        } else if (json_is_string(v)) {
                char *end;
                double d = decimal(json_string_value(v), &end);
                if (d >= 0 && strcmp(end, "m") == 0)
                        millis = d;
                else if (d >= 0 && *end == '\0')
                        millis = d * 1000;
        }
        if (millis < CTL_CPU_MILLIS_MIN || millis > (double)host_cpu_millis()) {
                *ret_msg = msg;
                return -EINVAL;
        }
        *ret = (uint64_t)(millis + 0.5);
        return 0;
}

static double unit_of(const char *suffix)
{
        static const struct {
                const char *name;
                double mult;
        } units[] = {
                { "", 1 },       { "K", 1e3 },          { "k", 1e3 },          { "M", 1e6 },
                { "G", 1e9 },    { "T", 1e12 },         { "Ki", 1024.0 },      { "Mi", 1048576.0 },
                { "Gi", 1073741824.0 }, { "Ti", 1099511627776.0 },
        };
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
                if (strcmp(suffix, units[i].name) == 0)
                        return units[i].mult;
        return -1;
}

int ctl_parse_memory(json_t *v, uint64_t *ret, const char **ret_msg)
{
        static const char msg[] = "memory must be bytes or a string like \"512Mi\", \"2Gi\" or \"1G\", "
                                  "from 16Mi to half the host's memory";
        *ret = 0;
        if (!v || json_is_null(v))
                return 0;
        double bytes = -1;
        if (json_is_number(v)) {
                bytes = json_number_value(v);
        } else if (json_is_string(v)) {
                char *end;
                double d = decimal(json_string_value(v), &end);
                double mult = d >= 0 ? unit_of(end) : -1;
                bytes = mult > 0 ? d * mult : -1;
        }
        if (bytes < (double)CTL_MEMORY_MIN || bytes > (double)host_memory_max()) {
                *ret_msg = msg;
                return -EINVAL;
        }
        *ret = (uint64_t)bytes;
        return 0;
}
