/**
 * A task's fields an amend patches in place instead of rerunning the task (docs/formats.md § Amend): they change
 * when or how visibly it runs, never what it does. `created` is here because a generated graph file stamps it anew
 * each time; it is never patched. Its own file, without imports: the web UI's Amend reads it too (to tell which
 * labels of an edited file get new tasks, src/ui/components/amendFile.ts).
 */
export const METADATA_FIELDS = ['created', 'deadline', 'expires', 'priority', 'routes', 'tags', 'metadata'] as const;
