#!/bin/bash
# Prints $GREETING (set by the template's env) and who runs it.
set -euo pipefail
echo "${GREETING:-Hello}, $(id -un 2>/dev/null || id -u)!"
