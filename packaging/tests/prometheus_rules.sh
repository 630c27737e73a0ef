#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# unit.prometheus_rules: packaging/prometheus/incin-rules.yml is a valid
# Prometheus rule file (`promtool check rules`) and its alerts fire as
# incin-rules.test.yml expects (`promtool test rules`). Every metric the
# rules name is one of those incamd and incswitchd export: lab.metrics
# checks that against live scrapes. Without promtool (Debian package
# prometheus; scripts/deps.sh installs it) the test is skipped (exit 77).
# Usage: prometheus_rules.sh [packaging/prometheus]
set -euo pipefail
DIR=${1:-$(cd "$(dirname "$0")/../prometheus" && pwd)}
command -v promtool >/dev/null || { echo "SKIP: promtool is not installed (apt-get install prometheus)" >&2; exit 77; }
promtool check rules "$DIR/incin-rules.yml"
# promtool resolves rule_files relative to the test file.
promtool test rules "$DIR/incin-rules.test.yml"
