-- The scheduler's reads carry scopes in Taskcluster's style: `scheduler:list-task-graphs` lists graphs and
-- `scheduler:get-task-graph:<taskGraphId>` reads one (status, info, inspect, nodes, changes). Before, they had
-- none, so emptying the `anonymous` role closed the queue's reads but left every graph's scopes, metadata and
-- labels public. The role grants them where it still grants the queue's task reads (migration 016), so graphs
-- stay as readable as their tasks: a deployment that made task reads private gets private graph reads too.
UPDATE roles SET scopes = scopes || ARRAY['scheduler:list-task-graphs', 'scheduler:get-task-graph:*'],
                 last_modified = now()
 WHERE role_id = 'anonymous' AND 'queue:get-task:*' = ANY(scopes);
-- every API process holds the roles it loaded with their generation: a bump makes them reload
UPDATE roles_generation SET generation = generation + 1;
