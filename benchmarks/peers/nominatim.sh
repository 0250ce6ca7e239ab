#!/usr/bin/env bash
# Nominatim 5 as a benchmark peer (never a package dependency of geoengine).
#
# Installs, imports and serves Nominatim on this Debian machine, for the benchmarks and dialect tests that
# compare geoengine with Nominatim on the same extract:
#   - apt: PostgreSQL 15 + PostGIS 3, osm2pgsql (>= 1.8), libicu-dev, pkg-config (PyICU builds from source);
#   - PyPI: nominatim-db and nominatim-api (NOMINATIM_VERSION, default 5.3.3) with falcon and uvicorn in
#     benchmarks/.peers/nominatim-venv;
#   - one project directory and one database per extract under benchmarks/.peers/nominatim/<name>:
#       apidb          liechtenstein/nominatim-apidb-test-data.osm.pbf   (Nominatim's own test extract)
#       liechtenstein  liechtenstein/valhalla-liechtenstein-latest.osm.pbf
#       andorra        andorra/andorra.osm.pbf
#   - `nominatim serve`-equivalent on loopback: uvicorn with Nominatim's Falcon app, run in the project
#     directory (NOMINATIM_WORKERS processes, default 1, which is exactly what `nominatim serve` runs).
#
# Every step is idempotent: packages already installed, a venv already made, a database already imported
# (marked complete by this script) and a server already answering are left as they are. A database that
# exists but whose import did not finish is dropped and imported again.
#
# Usage (from anywhere; data from $GEOENGINE_DATA_MIRROR, else ../shared/data beside the repository):
#   benchmarks/peers/nominatim.sh                    # install + import all + start all
#   benchmarks/peers/nominatim.sh setup [NAME...]    # same, for some extracts
#   benchmarks/peers/nominatim.sh install            # apt + venv only
#   benchmarks/peers/nominatim.sh import [NAME...]   # import (skips imported ones; --force re-imports)
#   benchmarks/peers/nominatim.sh start [NAME...]    # serve on 127.0.0.1:<port> (skips running ones)
#   benchmarks/peers/nominatim.sh stop [NAME...]     # stop the servers this script started (pid files)
#   benchmarks/peers/nominatim.sh status             # which are imported / serving, and their URLs
#   benchmarks/peers/nominatim.sh url NAME           # print http://127.0.0.1:<port>
# Ports: liechtenstein 8088, apidb 8089, andorra 8090 (NOMINATIM_PORT_<NAME> overrides).
# Logs: benchmarks/.peers/nominatim/<name>/{import,serve}.log. PostgreSQL: cluster 15/main, started with
# pg_ctlcluster when down (stop it with `pg_ctlcluster 15 main stop`).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PEERS="${NOMINATIM_PEERS_DIR:-$REPO/benchmarks/.peers}"
VENV="$PEERS/nominatim-venv"
PROJECTS="$PEERS/nominatim"
DATA="${GEOENGINE_DATA_MIRROR:-$REPO/../shared/data}"
VERSION="${NOMINATIM_VERSION:-5.3.3}"
WORKERS="${NOMINATIM_WORKERS:-1}"
THREADS="${NOMINATIM_THREADS:-2}"
PG_VERSION="${PG_VERSION:-15}"
ALL=(liechtenstein apidb andorra)

log() { printf '[nominatim-peer] %s\n' "$*" >&2; }

extract_of() {
    case "$1" in
        apidb) echo "$DATA/liechtenstein/nominatim-apidb-test-data.osm.pbf" ;;
        liechtenstein) echo "$DATA/liechtenstein/valhalla-liechtenstein-latest.osm.pbf" ;;
        andorra) echo "$DATA/andorra/andorra.osm.pbf" ;;
        *) log "unknown extract '$1' (known: ${ALL[*]})"; exit 2 ;;
    esac
}

port_of() {
    local var="NOMINATIM_PORT_${1^^}"
    if [[ -n "${!var:-}" ]]; then echo "${!var}"; return; fi
    case "$1" in
        liechtenstein) echo 8088 ;;
        apidb) echo 8089 ;;
        andorra) echo 8090 ;;
    esac
}

dbname_of() { echo "nominatim_$1"; }

psql_q() { psql -X -v ON_ERROR_STOP=1 -tAq "$@"; }

install_system() {
    local need=()
    dpkg -s "postgresql-$PG_VERSION-postgis-3" >/dev/null 2>&1 || need+=("postgresql-$PG_VERSION-postgis-3" "postgresql-$PG_VERSION-postgis-3-scripts")
    dpkg -s "postgresql-contrib" >/dev/null 2>&1 || need+=(postgresql-contrib)
    command -v osm2pgsql >/dev/null 2>&1 || need+=(osm2pgsql)
    dpkg -s libicu-dev >/dev/null 2>&1 || need+=(libicu-dev)
    command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
    command -v g++ >/dev/null 2>&1 || need+=(g++)
    if ((${#need[@]})); then
        log "apt-get install ${need[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
    fi
}

start_postgres() {
    if ! pg_lsclusters -h | awk -v v="$PG_VERSION" '$1==v && $2=="main" && $4=="online"' | grep -q .; then
        log "starting PostgreSQL $PG_VERSION/main"
        pg_ctlcluster "$PG_VERSION" main start
    fi
    # Nominatim runs as the invoking OS user (peer authentication over the socket) and grants read access
    # to its web user (www-data by default).
    local me
    me="$(id -un)"
    if [[ "$(su postgres -c "psql -X -tAc \"select 1 from pg_roles where rolname='$me'\"")" != 1 ]]; then
        su postgres -c "createuser -s '$me'"
    fi
    if [[ "$(psql_q -d postgres -c "select 1 from pg_roles where rolname='www-data'")" != 1 ]]; then
        psql_q -d postgres -c 'create role "www-data" login'
    fi
}

install_venv() {
    if [[ -x "$VENV/bin/nominatim" ]] && "$VENV/bin/python" -c "import nominatim_api, falcon, uvicorn" 2>/dev/null \
        && [[ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("nominatim-db"))')" == "$VERSION" ]]; then
        return
    fi
    mkdir -p "$PEERS"
    local py="${NOMINATIM_PYTHON:-python3}"
    [[ -x "$VENV/bin/python" ]] || "$py" -m venv "$VENV"
    log "pip install nominatim-db==$VERSION nominatim-api==$VERSION falcon uvicorn (PyICU builds from source)"
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q "nominatim-db==$VERSION" "nominatim-api==$VERSION" falcon uvicorn
}

install() {
    install_system
    start_postgres
    install_venv
}

is_imported() {
    local db
    db="$(dbname_of "$1")"
    [[ "$(psql_q -d postgres -c "select 1 from pg_database where datname='$db'")" == 1 ]] || return 1
    # set by import_one after `nominatim import` succeeded (import_status stays empty offline: Nominatim
    # cannot ask the OSM API for the data's date)
    [[ "$(psql_q -d "$db" -c "select count(*) from nominatim_properties where property='peer_import_complete'" \
        2>/dev/null || echo 0)" -ge 1 ]]
}

write_env() {
    local name="$1" dir="$PROJECTS/$1"
    mkdir -p "$dir"
    cat >"$dir/.env" <<EOF
# written by benchmarks/peers/nominatim.sh
NOMINATIM_DATABASE_DSN="pgsql:dbname=$(dbname_of "$name")"
NOMINATIM_IMPORT_STYLE=full
EOF
}

import_one() {
    local name="$1" force="$2" dir="$PROJECTS/$1" pbf db
    pbf="$(extract_of "$name")"
    db="$(dbname_of "$name")"
    [[ -f "$pbf" ]] || { log "missing extract $pbf"; exit 1; }
    write_env "$name"
    if [[ "$force" != 1 ]] && is_imported "$name"; then
        log "$name: already imported (database $db)"
        return
    fi
    stop_one "$name"
    if [[ "$(psql_q -d postgres -c "select 1 from pg_database where datname='$db'")" == 1 ]]; then
        log "$name: dropping unfinished or forced database $db"
        psql_q -d postgres -c "drop database \"$db\""
    fi
    log "$name: nominatim import --osm-file $pbf (log $dir/import.log)"
    local t0=$SECONDS
    (cd "$dir" && "$VENV/bin/nominatim" import --osm-file "$pbf" --threads "$THREADS" >"$dir/import.log" 2>&1) || {
        log "$name: import failed, tail of $dir/import.log:"; tail -20 "$dir/import.log" >&2; exit 1; }
    psql_q -d "$db" -c "insert into nominatim_properties values ('peer_import_complete', now()::text)"
    log "$name: imported in $((SECONDS - t0)) s"
}

pid_alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

answers() { curl -fsS -m 5 "http://127.0.0.1:$1/status?format=json" 2>/dev/null | grep -q '"status": *0'; }

start_one() {
    local name="$1" dir="$PROJECTS/$1" port
    port="$(port_of "$name")"
    write_env "$name"
    if pid_alive "$dir/serve.pid" && answers "$port"; then
        log "$name: serving on http://127.0.0.1:$port (pid $(cat "$dir/serve.pid"))"
        return
    fi
    if answers "$port"; then
        log "$name: something else already answers Nominatim's /status on port $port; leaving it"
        return
    fi
    is_imported "$name" || { log "$name: not imported; run '$0 import $name' first"; exit 1; }
    local args=(--host 127.0.0.1 --port "$port" --factory nominatim_api.server.falcon.server:run_wsgi --log-level warning)
    ((WORKERS > 1)) && args+=(--workers "$WORKERS")
    (
        cd "$dir"
        setsid "$VENV/bin/uvicorn" "${args[@]}" >"$dir/serve.log" 2>&1 </dev/null &
        echo $! >"$dir/serve.pid"
    )
    for _ in $(seq 1 60); do
        answers "$port" && { log "$name: serving on http://127.0.0.1:$port (pid $(cat "$dir/serve.pid"), $WORKERS worker(s))"; return; }
        sleep 0.5
    done
    log "$name: server did not answer; tail of $dir/serve.log:"; tail -20 "$dir/serve.log" >&2; exit 1
}

stop_one() {
    local dir="$PROJECTS/$1"
    if pid_alive "$dir/serve.pid"; then
        local pid
        pid="$(cat "$dir/serve.pid")"
        kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        log "$1: stopped (pid $pid)"
    fi
    rm -f "$dir/serve.pid"
}

status() {
    for name in "${ALL[@]}"; do
        local port imported=no serving=no
        port="$(port_of "$name")"
        is_imported "$name" 2>/dev/null && imported=yes
        answers "$port" && serving=yes
        printf '%-14s imported=%-3s serving=%-3s http://127.0.0.1:%s  %s\n' "$name" "$imported" "$serving" "$port" "$(extract_of "$name")"
    done
}

cmd="${1:-setup}"
shift || true
force=0
names=()
for a in "$@"; do
    case "$a" in
        --force) force=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; exit 0 ;;
        *) extract_of "$a" >/dev/null; names+=("$a") ;;
    esac
done
((${#names[@]})) || names=("${ALL[@]}")

case "$cmd" in
    -h|--help|help) sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d' ;;
    install) install ;;
    import) install; for n in "${names[@]}"; do import_one "$n" "$force"; done ;;
    start) start_postgres; for n in "${names[@]}"; do start_one "$n"; done ;;
    stop) for n in "${names[@]}"; do stop_one "$n"; done ;;
    status) status ;;
    url) echo "http://127.0.0.1:$(port_of "${names[0]}")" ;;
    setup) install; for n in "${names[@]}"; do import_one "$n" "$force"; done; for n in "${names[@]}"; do start_one "$n"; done; status ;;
    *) log "unknown command '$cmd' (setup|install|import|start|stop|status|url)"; exit 2 ;;
esac
