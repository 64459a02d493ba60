#!/usr/bin/env bash
# The coding-agent CLIs bat's adapter tests run for real, each pinned to an exact version
# in its own npm prefix:
#
#   ${BAT_CODING_AGENTS:-/opt/bat-coding-agents}/<preset-name>/node_modules/.bin/<program>
#
# Pinned, because a CLI's flags, events and start-up requests change between releases and
# the tests read them; one prefix each, so two CLIs never share (or fight over) a
# dependency. Idempotent: a CLI already installed at its pinned version is left alone.
# tests/coding_agents.py finds them there. One `install` line per CLI.
set -euo pipefail

ROOT=${BAT_CODING_AGENTS:-/opt/bat-coding-agents}

# install NAME PACKAGE VERSION: PACKAGE@VERSION into $ROOT/NAME, unless already there.
install() {
  local name=$1 package=$2 version=$3
  local prefix=$ROOT/$name
  local manifest=$prefix/node_modules/$package/package.json
  if [ -f "$manifest" ] && [ "$(node -p "require('$manifest').version")" = "$version" ]; then
    echo "coding agents: $name: $package@$version already installed"
    return
  fi
  echo "coding agents: $name: npm install $package@$version"
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "$package@$version"
}

# Claude Code ships a native binary (an optional dependency per platform) behind
# node_modules/.bin/claude; its package asks for node >= 22, which npm only warns about.
install claude-code @anthropic-ai/claude-code 2.1.332

# Qwen Code: the newest release whose package allows node 20 (0.21 and later ask for 22).
install qwen-code @qwen-code/qwen-code 0.15.10

# OpenAI Codex CLI: a native binary, fetched as the optional dependency
# @openai/codex-linux-x64 (and the like) of the pinned version.
install codex @openai/codex 0.171.0
