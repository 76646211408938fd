-- Groups not yet announced as resolved: the after-commit check and the backstop sweep look only here,
-- not through every group ever created (each standalone task makes one).
CREATE INDEX task_groups_unannounced ON task_groups (task_group_id) WHERE resolved_at IS NULL;
