"""What a command can observe of its jail, for tests that compare a fast
path's jail with a cold one's (tests/api/test_shell_pool.py,
tests/bridge/test_bridge_spare.py)."""

# What a command can observe of its jail, normalised only where two fresh
# jails must differ anyway (pipe and namespace inode numbers, mount ids, pids
# of the probe's own subprocesses, times).
PROBE = r"""
echo "== status"; grep -E '^(Seccomp|Seccomp_filters|NoNewPrivs|Cap(Inh|Prm|Eff|Bnd|Amb)|Uid|Gid|Groups|Umask):' /proc/self/status
echo "== fds"; for f in /proc/self/fd/*; do echo "${f##*/} $(readlink $f)"; done | sed -E 's/[0-9]+/N/g'
echo "== mounts"; cut -d' ' -f4- /proc/self/mountinfo | sed -E 's/ shared:[0-9]+| master:[0-9]+//g' | sort
echo "== net"; awk 'NR>2 {print $1}' /proc/net/dev; cat /proc/net/route | wc -l
echo "== env"; env | grep -v '^_=' | sort
echo "== ids"; id; hostname; pwd; umask
echo "== limits"; ulimit -a
echo "== cgroup"; cat /proc/self/cgroup
echo "== init"; grep -E '^(Name|Uid|Gid|NoNewPrivs|Seccomp|CapEff):' /proc/1/status; tr '\0' ' ' < /proc/1/cmdline; echo
echo "== fs"; ls -la /workspace /tmp | sed -E 's/[A-Z][a-z]{2} +[0-9]+ +[0-9:]+//'; df -k /workspace /tmp | awk 'NR>1 {print $1, $2, $6}'
echo "== dev"; ls /dev | sort | tr '\n' ' '; echo
"""


def sections(lines):
    """{section name: its lines} of PROBE's output lines."""
    out, cur = {}, None
    for line in lines:
        if line.startswith("== "):
            cur = line[3:]
            out[cur] = []
        else:
            out[cur].append(line)
    return out
