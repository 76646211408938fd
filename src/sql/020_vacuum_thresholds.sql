-- Autovacuum's thresholds for the two tables every claim and report churns. By default a table is vacuumed once a
-- fifth of its rows are dead, so a `tasks` table of a million rows waited for 200,000 dead row versions, and each
-- of them leaves an entry in the pending index at exactly the place every claim's pick starts reading (FIFO order
-- puts the claimed tasks at its head). Measured on a 100,000-task graph (docs/bench-journal/2026-11-26.md): a claim read 661
-- buffers (1.66 ms) with no vacuum during the run, 248 (0.86 ms) with `tasks` vacuumed every ~10 s. A fixed number
-- of dead rows instead of a share keeps the walk short whatever the table's size; how often autovacuum looks is
-- the server's `autovacuum_naptime` (docs/deployments.md). `outbox` holds only rows the relay has not published
-- yet, so it is vacuumed after a few thousand deletes, and analyzed no more often than by default: its statements
-- do not take their plans from its statistics (src/exchanges/relay.ts).
ALTER TABLE tasks SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
                       autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 10000);
ALTER TABLE outbox SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
