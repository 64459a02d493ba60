#!/usr/bin/env bash
# Services for the image tests (bat build / bat push), all on 127.0.0.1:
#
#   * a Docker engine: dockerd from Debian's docker.io, --bridge=none --iptables=false
#     --ip-masq=false, on the default socket unix:///var/run/docker.sock;
#   * two registries (Debian's docker-registry): a plain one on :5000 and one with
#     htpasswd (bcrypt) authentication on :5001;
#   * an sshd on :2222 with its own host key, a generated client key allowed to log in
#     as root, and a known_hosts file that holds the host key;
#   * a base image, bat-ci-base:1, made with `docker import` (nothing can be pulled):
#     /bin/tini (a static binary, from Debian's tini) and /etc/bat-ci-base.
#
# Idempotent: a service that already answers is left running; keys, passwords and
# configuration are made once under the state folder and reused. Run it as root (or as
# a user with password-less sudo: it re-runs itself through sudo and hands the facts
# file, the client key and the Docker socket to that user). Missing packages are
# installed with apt-get. Nothing listens beyond 127.0.0.1.
#
# It writes what the tests need to /tmp/bat-ci-services.env (KEY=value lines; see the
# end of this file) and prints it. The tests read that file; with CI set, a missing
# service fails them instead of skipping them.
#
# Environment: BAT_CI_STATE (state folder, default /tmp/bat-ci-services) and
# BAT_CI_SERVICES_ENV (the facts file, default /tmp/bat-ci-services.env).
set -euo pipefail

STATE=${BAT_CI_STATE:-/tmp/bat-ci-services}
ENV_FILE=${BAT_CI_SERVICES_ENV:-/tmp/bat-ci-services.env}
REPO=$(cd "$(dirname "$0")/.." && pwd)
DOCKER_SOCK=/var/run/docker.sock
REGISTRY_PORT=5000
AUTH_REGISTRY_PORT=5001
SSH_PORT=2222
AUTH_USER=bat-ci
BASE_IMAGE=bat-ci-base:1

say() { echo "services: $*"; }
die() { echo "services: error: $*" >&2; exit 1; }

if [ "$(id -u)" != 0 ]; then
    # Not root: go through sudo (without a password prompt); the files the tests read are
    # handed to the calling user at the end.
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        exec sudo -n -E bash "$0" "$@"
    fi
    die "run as root (it starts dockerd and sshd), or as a user with password-less sudo"
fi
mkdir -p "$STATE"
chmod 700 "$STATE"

# -- packages ---------------------------------------------------------------------------

apt_updated=0
apt_install() {
    if [ "$apt_updated" = 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        apt_updated=1
    fi
    say "installing $*"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

command -v dockerd >/dev/null || apt_install docker.io
command -v docker >/dev/null || apt_install docker.io
[ -x /usr/bin/tini-static ] || apt_install tini
command -v docker-registry >/dev/null || apt_install docker-registry
[ -x /usr/sbin/sshd ] || apt_install openssh-server
command -v ssh-keygen >/dev/null || apt_install openssh-client
command -v curl >/dev/null || apt_install curl

# -- helpers ----------------------------------------------------------------------------

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local seconds=$1 what=$2
    shift 2
    local end=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.2
    done
    say "$what is up"
}

http_code() { curl -s -o /dev/null -w '%{http_code}' --noproxy '*' --max-time 2 "$1" || true; }

registry_answers() {  # registry_answers PORT EXPECTED_CODE
    [ "$(http_code "http://127.0.0.1:$1/v2/")" = "$2" ]
}

ssh_answers() {
    local banner
    banner=$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$SSH_PORT && head -c 7 <&3" 2>/dev/null) || return 1
    [ "$banner" = "SSH-2.0" ]
}

engine_answers() { DOCKER_HOST=unix://$DOCKER_SOCK docker version --format '{{.Server.Version}}'; }

random_secret() { head -c 18 /dev/urandom | base64 | tr -d '/+=\n'; }

# -- Docker engine ----------------------------------------------------------------------

if engine_answers >/dev/null 2>&1; then
    say "dockerd already answers on $DOCKER_SOCK"
else
    say "starting dockerd"
    setsid nohup dockerd --bridge=none --iptables=false --ip-masq=false \
        --host="unix://$DOCKER_SOCK" >"$STATE/dockerd.log" 2>&1 </dev/null &
    wait_for 60 "dockerd" engine_answers || die "dockerd did not start; see $STATE/dockerd.log"
fi
export DOCKER_HOST=unix://$DOCKER_SOCK

if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    say "base image $BASE_IMAGE exists"
else
    base=$(mktemp -d)
    mkdir -p "$base/root/bin" "$base/root/etc"
    cp /usr/bin/tini-static "$base/root/bin/tini"
    echo "bat-ci-base 1: a base image for bat's tests, made with docker import" \
        >"$base/root/etc/bat-ci-base"
    tar -C "$base/root" -cf "$base/base.tar" .
    docker import --change 'ENTRYPOINT ["/bin/tini", "--"]' "$base/base.tar" "$BASE_IMAGE" >/dev/null
    rm -rf "$base"
    say "imported base image $BASE_IMAGE"
fi

# -- registries -------------------------------------------------------------------------

if [ ! -s "$STATE/auth-password" ]; then
    (umask 077 && random_secret >"$STATE/auth-password")
fi
AUTH_PASSWORD=$(cat "$STATE/auth-password")

make_htpasswd() {  # bcrypt, with whatever can make it here
    local python
    if command -v htpasswd >/dev/null; then
        htpasswd -nbB "$AUTH_USER" "$AUTH_PASSWORD" | head -n 1
        return
    fi
    for python in "${BAT_CI_PYTHON:-}" "$REPO/.venv/bin/python" python3; do
        [ -n "$python" ] && command -v "$python" >/dev/null || continue
        if "$python" -c 'import bcrypt' 2>/dev/null; then
            AUTH_USER=$AUTH_USER AUTH_PASSWORD=$AUTH_PASSWORD "$python" -c '
import bcrypt, os
hashed = bcrypt.hashpw(os.environ["AUTH_PASSWORD"].encode(), bcrypt.gensalt(rounds=10))
print(os.environ["AUTH_USER"] + ":" + hashed.decode())'
            return
        fi
    done
    apt_install apache2-utils
    htpasswd -nbB "$AUTH_USER" "$AUTH_PASSWORD" | head -n 1
}

if [ ! -s "$STATE/htpasswd" ]; then
    make_htpasswd >"$STATE/htpasswd.new"
    grep -q "^$AUTH_USER:\$2" "$STATE/htpasswd.new" || die "could not make a bcrypt htpasswd"
    mv "$STATE/htpasswd.new" "$STATE/htpasswd"
fi

start_registry() {  # start_registry PORT WITH_AUTH(0|1)
    local port=$1 auth=$2 expected=200 config="$STATE/registry-$1.yml"
    [ "$auth" = 1 ] && expected=401
    if registry_answers "$port" "$expected"; then
        say "registry on 127.0.0.1:$port already answers"
        return
    fi
    mkdir -p "$STATE/registry-$port"
    {
        echo "version: 0.1"
        echo "log: {level: warn, fields: {service: registry-$port}}"
        echo "storage:"
        echo "  filesystem: {rootdirectory: $STATE/registry-$port}"
        echo "  delete: {enabled: true}"
        echo "http:"
        echo "  addr: 127.0.0.1:$port"
        echo "  secret: $(random_secret)"
        if [ "$auth" = 1 ]; then
            echo "auth:"
            echo "  htpasswd: {realm: bat-ci, path: $STATE/htpasswd}"
        fi
    } >"$config"
    say "starting registry on 127.0.0.1:$port"
    setsid nohup docker-registry serve "$config" >"$STATE/registry-$port.log" 2>&1 </dev/null &
    wait_for 30 "registry on 127.0.0.1:$port" registry_answers "$port" "$expected" ||
        die "registry on :$port did not start; see $STATE/registry-$port.log"
}

start_registry "$REGISTRY_PORT" 0
start_registry "$AUTH_REGISTRY_PORT" 1

# -- sshd -------------------------------------------------------------------------------

SSH_DIR=$STATE/ssh
mkdir -p "$SSH_DIR"
chmod 700 "$SSH_DIR"
[ -s "$SSH_DIR/host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C bat-ci-host -f "$SSH_DIR/host_ed25519"
[ -s "$SSH_DIR/client_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C bat-ci-client -f "$SSH_DIR/client_ed25519"
cp "$SSH_DIR/client_ed25519.pub" "$SSH_DIR/authorized_keys"
echo "[127.0.0.1]:$SSH_PORT $(cut -d' ' -f1,2 "$SSH_DIR/host_ed25519.pub")" >"$SSH_DIR/known_hosts"
cat >"$SSH_DIR/sshd_config.new" <<EOF
# sshd for bat's image tests: keys only, 127.0.0.1 only.
Port $SSH_PORT
ListenAddress 127.0.0.1
HostKey $SSH_DIR/host_ed25519
PidFile $SSH_DIR/sshd.pid
AuthorizedKeysFile $SSH_DIR/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
# Tests connect from several workers at once: sshd's default (10 connections waiting
# for their login, then it drops some) resets connections at the banner.
MaxStartups 200:30:400
EOF

changed=0
if ! cmp -s "$SSH_DIR/sshd_config.new" "$SSH_DIR/sshd_config"; then
    mv "$SSH_DIR/sshd_config.new" "$SSH_DIR/sshd_config"
    changed=1
fi
rm -f "$SSH_DIR/sshd_config.new"
if ssh_answers && [ "$changed" = 0 ]; then
    say "sshd already answers on 127.0.0.1:$SSH_PORT"
else
    if ssh_answers && [ -s "$SSH_DIR/sshd.pid" ]; then  # an older configuration: restart
        kill "$(cat "$SSH_DIR/sshd.pid")" 2>/dev/null || true
        for _ in $(seq 50); do ssh_answers || break; sleep 0.1; done
    fi
    mkdir -p /run/sshd
    say "starting sshd on 127.0.0.1:$SSH_PORT"
    /usr/sbin/sshd -f "$SSH_DIR/sshd_config" -E "$SSH_DIR/sshd.log"
    wait_for 15 "sshd" ssh_answers || die "sshd did not start; see $SSH_DIR/sshd.log"
fi

# -- facts for the tests ----------------------------------------------------------------

cat >"$ENV_FILE.new" <<EOF
# Written by .ci/services.sh: what the image tests use (tests/test_images_*.py).
BAT_CI_DOCKER_HOST=unix://$DOCKER_SOCK
BAT_CI_BASE_IMAGE=$BASE_IMAGE
BAT_CI_REGISTRY=127.0.0.1:$REGISTRY_PORT
BAT_CI_AUTH_REGISTRY=127.0.0.1:$AUTH_REGISTRY_PORT
BAT_CI_AUTH_USER=$AUTH_USER
BAT_CI_AUTH_PASSWORD=$AUTH_PASSWORD
BAT_CI_SSH_HOST=root@127.0.0.1:$SSH_PORT
BAT_CI_SSH_KEY=$SSH_DIR/client_ed25519
BAT_CI_SSH_KNOWN_HOSTS=$SSH_DIR/known_hosts
BAT_CI_STATE=$STATE
EOF
chmod 600 "$ENV_FILE.new"
mv "$ENV_FILE.new" "$ENV_FILE"

if [ -n "${SUDO_UID:-}" ] && [ "$SUDO_UID" != 0 ]; then
    # Started through sudo: the tests run as the calling user, who needs the facts file,
    # the client key, known_hosts and the Docker socket.
    chmod 711 "$STATE" "$SSH_DIR"
    chown "$SUDO_UID:$SUDO_GID" "$ENV_FILE" "$SSH_DIR/client_ed25519" "$SSH_DIR/client_ed25519.pub"
    chmod 644 "$SSH_DIR/known_hosts"
    chgrp "$SUDO_GID" "$DOCKER_SOCK" && chmod 660 "$DOCKER_SOCK"
    say "handed the facts, the client key and the Docker socket to uid $SUDO_UID"
fi
say "facts written to $ENV_FILE:"
sed -e '/^#/d' -e 's/^\(BAT_CI_AUTH_PASSWORD=\).*/\1(hidden)/' -e 's/^/  /' "$ENV_FILE"
