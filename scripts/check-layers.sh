#!/usr/bin/env bash
# Fails when an #include in src/ points up the layers (docs/architecture.md):
#
#   base ← config
#   base ← jail ← shim
#   base, jail (paths inside the jail) ← runtimes
#   base ← store
#   base, store ← tenant
#   base, jail, runtimes, shim(wire format only) ← engine
#   base, jail, runtimes, engine, store, tenant ← sandbox
#   base, jail, runtimes, engine, store, tenant, sandbox ← cluster
#   base ← http
#   base ← client ← mcp ;  base, client, mcp ← cli   (the HTTP client side)
#   everything but main and cli ← api ;  everything ← main.c
#
# Usage: scripts/check-layers.sh [SRC_DIR]   (default: src next to this script)
# Prints one line per upward include and exits 1 if there is any.
set -euo pipefail

src=${1:-"$(dirname "$0")/../src"}

# Which top-level folders a folder may include from (itself always allowed).
declare -A allowed=(
  [base]=""
  [config]="base"
  [jail]="base"
  [shim]="base jail"
  [runtimes]="base jail"
  [store]="base"
  [tenant]="base store"
  [engine]="base jail runtimes shim"
  [sandbox]="base jail runtimes engine store tenant"
  [cluster]="base jail runtimes engine store tenant sandbox"
  [http]="base"
  [client]="base"
  [mcp]="base client"
  [cli]="base client mcp"
  [api]="base config jail runtimes shim engine store tenant sandbox cluster http client mcp"
)

bad=0
while IFS= read -r -d '' file; do
  rel=${file#"$src"/}
  layer=${rel%%/*}
  [ "$rel" = main.c ] && continue
  if [ -z "${allowed[$layer]+set}" ]; then
    echo "$rel: folder '$layer' is not in the layer table (scripts/check-layers.sh)"
    bad=1
    continue
  fi
  while IFS=: read -r line target; do
    dep=${target%%/*}
    [ "$dep" = "$target" ] && continue      # "foo.h" next to the file
    [ "$dep" = "$layer" ] && continue
    case " ${allowed[$layer]} " in
      *" $dep "*) ;;
      *) echo "$rel:$line: includes \"$target\": $layer/ may not depend on $dep/"; bad=1 ;;
    esac
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
           sed -E 's/^([0-9]+):[^"]*"([^"]+)".*/\1:\2/')
done < <(find "$src" -type f \( -name '*.c' -o -name '*.h' \) -print0 | sort -z)

if [ "$bad" -ne 0 ]; then
  echo "layers: FAILED (an include points up the layers)"
  exit 1
fi
echo "layers: ok"
