-- The deployment's secret that hook fire ids are derived from (src/hooks/fireTaskId.ts): an HMAC of the hook and what
-- the fire stands for (a schedule time, a message), so nobody without database access can compute the taskId of a fire
-- to come and create a task or graph under it first (security review 2026-11-28, finding 3). 256 bits of
-- gen_random_uuid()'s strong randomness (two v4 UUIDs: 244 random bits), generated once per database; every process
-- of the deployment reads the same row. Rotating it (UPDATE … SET hook_fire_key = …) only changes the ids of fires to
-- come: a schedule fire retried across the rotation would create its task a second time, so rotate with schedules
-- paused.
ALTER TABLE tgs_deployment ADD COLUMN hook_fire_key text NOT NULL
  DEFAULT replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '');
ALTER TABLE tgs_deployment ALTER COLUMN hook_fire_key DROP DEFAULT;
