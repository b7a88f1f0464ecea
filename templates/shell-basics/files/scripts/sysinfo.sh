#!/bin/bash
# A short summary of the sandbox: kernel, CPUs, memory, workspace usage.
set -euo pipefail
echo "kernel:    $(uname -sr)"
echo "cpus:      $(nproc)"
echo "memory:    $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
echo "workspace: $(du -sh /workspace 2>/dev/null | cut -f1)"
