#!/usr/bin/env bash
# Re-checks what docs/deploy.md says about the unit's hardening, on a machine
# whose pid 1 need not be systemd: each option is reproduced by hand (a
# private mount namespace with the same read-only or masking mounts, or
# setpriv for the capability bounding set and no_new_privs), a daemon is
# started inside it, and three things are tried: a stateless execution, an
# execution in a new sandbox (ext4 image, loop mount, warm template) and a
# shell execution. Each case states what the page says must happen ("works"
# or "breaks"); the script prints PASS when the daemon agrees, FAIL
# otherwise, and exits 1 on any FAIL. Root only; a few seconds per case.
#
#   dist/systemd/probe-hardening.sh [build/sandboxd]
set -uo pipefail

BIN=$(realpath "${1:-build/sandboxd}")
WORK=$(mktemp -d /tmp/sbx-probe-XXXXXX)
chmod 0755 "$WORK"
trap 'rm -rf "$WORK"' EXIT
CAPS=sys_admin,setuid,setgid,setpcap,chown,fowner,fsetid,dac_override,dac_read_search,kill,net_admin,sys_ptrace,sys_resource,sys_chroot,mknod,net_bind_service
fails=0

post() { # post PORT PATH CODE -> "ok" when the answer carries results, else the answer
        local out
        out=$(curl -s -m 30 -XPOST "localhost:$1$2" -H 'content-type: application/json' -d "{\"code\":\"$3\"}")
        if [[ $out == *'"results"'* && $out != *'"error"'* ]]; then echo ok; else echo "${out:0:160}"; fi
}

# probe NAME EXPECT SETUP [WRAPPER]: EXPECT is works | breaks
probe() {
        local name=$1 expect=$2 setup=$3 wrap=${4:-} port=$((20000 + RANDOM % 20000)) dd="$WORK/$1" pid got
        mkdir -p "$dd"
        unshare -m --propagation private bash -c "$setup
                exec $wrap '$BIN' --listen 127.0.0.1:$port --data-dir '$dd' --log-level info" >"$WORK/$name.log" 2>&1 &
        pid=$!
        for _ in $(seq 100); do curl -sf "localhost:$port/health" >/dev/null && break; sleep 0.1; done
        local a b c
        a=$(post "$port" /execute/python '1+1')
        b=$(post "$port" /languages/python/sandboxes/probe/execute "open('/workspace/f','w').write('x')")
        c=$(post "$port" /execute/shell 'echo ok')
        local cg template
        cg=$(grep -o 'cgroup=[a-z0-9]*' "$WORK/$name.log" | head -1)
        template=$(grep -c 'template start failed' "$WORK/$name.log")
        if [[ $a == ok && $b == ok && $c == ok && $cg != cgroup=none && $template == 0 ]]; then got=works; else got=breaks; fi
        if [[ $got == "$expect" ]]; then echo "PASS $name: $got"; else echo "FAIL $name: $got, the page says $expect"; fails=1; fi
        [[ $got == works ]] || echo "     stateless: $a | sandbox: $b | shell: $c | $cg | template failures: $template"
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
}

[ "$(id -u)" -eq 0 ] || { echo "probe-hardening: run as root" >&2; exit 2; }
[ -x "$BIN" ] || { echo "probe-hardening: $BIN is not built" >&2; exit 2; }

RO_ALL='for m in $(findmnt -rn -o TARGET | grep -v "^/proc\|^/sys\|^/dev" | sort); do mount -o remount,bind,ro "$m" 2>/dev/null; done'

probe baseline works ":"
probe NoNewPrivileges+CapabilityBoundingSet works ":" "setpriv --no-new-privs --bounding-set=-all,$(sed 's/\([a-z_]*\)/+\1/g' <<<"$CAPS")"
probe ProtectSystem=strict+ReadWritePaths=/run+ProtectHome works \
        "mount --bind '$WORK' '$WORK'; mount --bind /run /run; $RO_ALL; mount -o remount,bind,rw '$WORK'; mount -o remount,bind,rw /run; mount -t tmpfs -o ro tmpfs /home; mount -t tmpfs -o ro tmpfs /root"
probe ProtectSystem=strict-without-/run breaks \
        "mount --bind '$WORK' '$WORK'; $RO_ALL; mount -o remount,bind,rw '$WORK'"
probe ProtectKernelTunables breaks "mount --bind /proc/sys /proc/sys; mount -o remount,bind,ro /proc/sys"
probe ProtectKernelLogs breaks "mount --bind /dev/null /proc/kmsg"
probe ProtectControlGroups breaks 'for m in $(findmnt -rn -o TARGET | grep "^/sys/fs/cgroup"); do mount -o remount,bind,ro "$m"; done'
probe PrivateDevices breaks \
        "mount -t tmpfs -o mode=755 tmpfs /dev; for d in null zero full random urandom tty; do touch /dev/\$d; mount --bind /proc/1/root/dev/\$d /dev/\$d; done; mkdir /dev/pts /dev/shm; ln -s pts/ptmx /dev/ptmx"
exit $fails
