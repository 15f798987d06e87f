#!/bin/sh
# promtool_rules.sh test|check FILE [PROMTOOL]
#   test:  promtool test rules FILE (unit tests of the alerting rules)
#   check: promtool check rules FILE (the rules file itself)
# Skips (exit 77, meson's code for a skipped test) when PROMTOOL is missing or empty:
# meson passes nothing when it found no promtool.
set -u

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
    echo "usage: $0 test|check FILE [PROMTOOL]" >&2
    exit 2
fi
action=$1
file=$2
promtool=${3:-}

case $action in
    test | check) ;;
    *)
        echo "$0: unknown action '$action' (test or check)" >&2
        exit 2
        ;;
esac

if [ -z "$promtool" ]; then
    echo "SKIP: promtool not found (Debian: apt-get install prometheus); the rules are not checked"
    exit 77
fi

exec "$promtool" "$action" rules "$file"
