#!/usr/bin/env bash
# Install Seedance with every extra and run the test suite on a fresh machine of this kind.
# Starts PostgreSQL and Redis when they are down (installing the Debian packages if needed) and
# installs Debian's chromium for the browser tests. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "[test.sh] $*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then as_root apt-get update -qq >/dev/null; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

# --- services -----------------------------------------------------------------------------
if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  log "PostgreSQL is down: starting it"
  command -v pg_ctlcluster >/dev/null || apt_install postgresql
  ver=$(ls /etc/postgresql | sort -V | tail -1)
  as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
  for _ in $(seq 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
  pg_isready -h 127.0.0.1 -p 5432 -q || { log "PostgreSQL did not start"; exit 1; }
  psql -h 127.0.0.1 -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='test'" | grep -q 1 \
    || psql -h 127.0.0.1 -U postgres -c "CREATE DATABASE test" >/dev/null
fi
if ! (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; then
  log "Redis is down: starting it"
  command -v redis-server >/dev/null || apt_install redis-server
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 20); do (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null && break; sleep 0.5; done
fi
# --- browser for the dashboard tests ----------------------------------------------------------
if ! command -v chromium >/dev/null; then
  log "installing Debian chromium for the browser tests"
  apt_install chromium
fi

# --- Python environment -------------------------------------------------------------------
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null
.venv/bin/pip install -q -e '.[all,test]'

export RAY_USAGE_STATS_ENABLED=0 RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
.venv/bin/ruff check src tests benchmarks
.venv/bin/mypy
# two workers (the machine kind has 2 cores; many tests wait on servers); every Ray test runs on one
# worker (xdist_group "ray"), so at most one local Ray cluster is up. SEEDANCE_TEST_WORKERS=0: no xdist.
exec .venv/bin/python -m pytest -n "${SEEDANCE_TEST_WORKERS:-2}" --dist loadgroup --durations=15 "$@"
