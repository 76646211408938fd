#!/bin/sh
# The one-shot schema job of docker-compose.yml's Temporal (run in temporalio/admin-tools before temporalio/server
# starts): makes or updates the tables of Temporal's two databases, which deploy/postgres/initdb/10-roles.sh made
# and gave to the role `temporal`. Safe to run at every `docker compose up`: setup-schema -v 0.0 records version 0.0
# only where there is none yet, and update-schema applies what a newer image adds.
set -eu
# temporal-sql-tool reads SQL_PLUGIN, SQL_HOST, SQL_PORT, SQL_USER and SQL_PASSWORD (not on the command line, where
# `ps` would show the password) from the service's environment.
: "${SQL_PASSWORD:?set TEMPORAL_DB_PASSWORD in .env}"
for db in temporal temporal_visibility; do
  case "$db" in
    temporal) dir=/etc/temporal/schema/postgresql/v12/temporal/versioned ;;
    *) dir=/etc/temporal/schema/postgresql/v12/visibility/versioned ;;
  esac
  temporal-sql-tool --db "$db" setup-schema -v 0.0
  temporal-sql-tool --db "$db" update-schema -d "$dir"
  echo "schema of $db is up to date"
done
