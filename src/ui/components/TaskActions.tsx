// Rerun and Cancel for one task, signed with the tab's credentials: the graph page's side panel and the task page.
// A graph's task is rerun through the scheduler (so the graph follows it, with `resetDependents`), any other task
// through the queue's rerunTask; a cancel is the queue's cancelTask either way. Signed out, the buttons are
// disabled and say why.
import { useEffect, useState } from 'preact/hooks';
import { ActionResult, ConfirmButton, SignInHint, useAction, useActionsEnabled } from './Actions';

export function TaskActions(props: { taskId: string; taskGraphId?: string; resolved: boolean; heading: 'h2' | 'h3'; onDone?: () => void }) {
  const { taskId, taskGraphId, resolved, heading: Heading, onDone } = props;
  const [resetDependents, setResetDependents] = useState(false);
  const base = useAction();
  // an accepted action changes the task: the page reads it again (onDone)
  const action = { ...base, run: async (spec: Parameters<typeof base.run>[0]) => ((await base.run(spec)) ? (onDone?.(), true) : false) };
  const signedIn = useActionsEnabled();
  useEffect(() => action.clear(), [taskId]);
  return (
    <section class="actions">
      <Heading>Actions</Heading>
      <SignInHint />
      <div class="action-row">
        <button
          name="rerun"
          disabled={action.busy || !resolved || !signedIn.enabled}
          title={signedIn.title ?? (resolved ? '' : 'only a resolved task can be rerun')}
          onClick={() =>
            action.run(
              taskGraphId
                ? {
                    service: 'scheduler',
                    method: 'POST',
                    path: `/task-graph/${taskGraphId}/rerun/${taskId}`,
                    body: { resetDependents },
                    done: () => `Rerun accepted${resetDependents ? ', with the dependents that already resolved' : ''}: a new run is scheduled.`,
                  }
                : { service: 'queue', method: 'POST', path: `/task/${taskId}/rerun`, done: () => 'Rerun accepted: a new run is scheduled.' },
            )
          }
        >
          Rerun
        </button>
        {taskGraphId && (
          <label class="check">
            <input type="checkbox" name="resetDependents" checked={resetDependents} onChange={(e) => setResetDependents(e.currentTarget.checked)} /> also rerun
            the dependents that already resolved
          </label>
        )}
      </div>
      <div class="action-row">
        <ConfirmButton
          name="cancel-task"
          label="Cancel task"
          confirm="Cancel this task?"
          disabled={action.busy || resolved || !signedIn.enabled}
          title={signedIn.title ?? (resolved ? 'a resolved task cannot be canceled' : undefined)}
          onConfirm={() => action.run({ service: 'queue', method: 'POST', path: `/task/${taskId}/cancel`, done: () => 'Task canceled.' })}
        />
      </div>
      <ActionResult result={action.result} />
    </section>
  );
}
