#!/bin/bash
# The N (default 10) most frequent words of a file: ./scripts/wordcount.sh FILE [N]
set -euo pipefail
file=${1:?usage: wordcount.sh FILE [N]}
tr -cs '[:alnum:]' '\n' < "$file" | tr '[:upper:]' '[:lower:]' | grep -v '^$' | sort | uniq -c | sort -rn | head -n "${2:-10}"
