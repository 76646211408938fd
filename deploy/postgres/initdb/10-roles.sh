#!/bin/sh
# Run once by the postgres image on an empty data directory (docker-compose.yml mounts this directory at
# /docker-entrypoint-initdb.d), as its bootstrap superuser, before the server listens on the network. It makes:
# - tgs' database, its owner role (`tgs migrate`) and its app role (the tgs processes): deploy/postgres/tgs-roles.psql;
# - Temporal's role and its two databases, which the role owns (temporal-sql-tool makes the tables; no CREATEDB).
# The passwords come from .env through the postgres service's environment; none has a default.
set -eu
: "${TGS_DB_OWNER_PASSWORD:?set TGS_DB_OWNER_PASSWORD in .env}"
: "${TGS_DB_APP_PASSWORD:?set TGS_DB_APP_PASSWORD in .env}"
: "${TEMPORAL_DB_PASSWORD:?set TEMPORAL_DB_PASSWORD in .env}"

psql -X -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v db=tgs -v owner_role=tgs_owner -v owner_password="$TGS_DB_OWNER_PASSWORD" \
  -v app_role=tgs_app -v app_password="$TGS_DB_APP_PASSWORD" \
  -f /tgs-postgres/tgs-roles.psql

psql -X -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres -v temporal_password="$TEMPORAL_DB_PASSWORD" <<'SQL'
CREATE ROLE temporal LOGIN PASSWORD :'temporal_password' NOSUPERUSER NOCREATEDB NOCREATEROLE;
CREATE DATABASE temporal OWNER temporal;
CREATE DATABASE temporal_visibility OWNER temporal;
REVOKE ALL ON DATABASE temporal FROM PUBLIC;
REVOKE ALL ON DATABASE temporal_visibility FROM PUBLIC;
-- Temporal's visibility schema starts with CREATE EXTENSION btree_gin: made here by the superuser, so the schema job
-- finds it and needs no more than ownership of its databases.
\connect temporal_visibility
CREATE EXTENSION IF NOT EXISTS btree_gin;
SQL
