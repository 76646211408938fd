// The graph page's Amend (docs/formats.md § Amend, docs/ui.md): the graph's current file in an editor (or a file
// uploaded, JSON or YAML as `tgs graph amend` reads it), a dry run that says which labels rerun, which are patched,
// added or removed, then Apply. Signed with the session's credentials; a refusal shows in full (400 names the labels,
// 403 the missing scope).
import { useEffect, useMemo, useState } from 'preact/hooks';
import { apiGet, apiSigned, ApiError, describeError, rootUrl } from '../api';
import { getCredentials } from '../session';
import { prepareAmend, type FileNode, type PreparedAmend } from './amendFile';
import { AMEND_MARKS, amendCode } from '../graph/amendMarks';

/** The graph's file as GET .../file gives it. */
interface GraphFile {
  tasks: Record<string, FileNode>;
  missing: string[];
}

type Classes = 'changed' | 'dependent' | 'added' | 'metadata' | 'removed';

/** The amend endpoint's answer. */
export interface AmendAnswer {
  dryRun: boolean;
  amend?: number;
  state: string;
  classification: Record<Classes, string[]> & { unchanged: number };
  tasks: { label: string; taskId: string }[];
  /** dependents whose completed run stands if what they require comes out byte-identical (early cutoff; absent before it) */
  mayBeKept?: string[];
  workflow: string;
}

/** Past this many characters the text is not put in the editor (a browser's textarea crawls): download, edit, upload. */
const EDITOR_LIMIT = 5_000_000;
/** Labels a class lists before "… and N more". */
const SHOWN_LABELS = 50;

/** The dry run's classes, each in the colour of the mark its nodes will carry. */
const GROUPS: { key: Classes; title: string; what: string; color: string }[] = [
  { key: 'changed', title: 'changed', what: 'a new task runs', mark: 'c' },
  { key: 'dependent', title: 'dependent', what: 'a new task, as something it requires changed', mark: 'd' },
  { key: 'added', title: 'added', what: 'a new task', mark: 'a' },
  { key: 'metadata', title: 'metadata only', what: 'patched in place, not run again', mark: 'm' },
  { key: 'removed', title: 'removed', what: 'canceled if unresolved, no longer in the graph', mark: 's' },
].map(({ mark, ...group }) => ({ ...group, key: group.key as Classes, color: AMEND_MARKS[amendCode(mark)].color }));

/** One sentence for the header once an amend was applied. */
export function appliedText(a: AmendAnswer): string {
  const c = a.classification;
  const rerun = c.changed.length + c.dependent.length + c.added.length;
  const parts = [`${rerun} new task${rerun === 1 ? '' : 's'}`, `${c.metadata.length} patched`, `${c.removed.length} removed`, `${c.unchanged} unchanged`];
  const workflow: Record<string, string> = {
    started: 'the graph had finished: it runs again',
    updated: `the ${a.state} graph runs the new tasks`,
    unchanged: `nothing to run; the graph is ${a.state}`,
    'not-running': "the graph's workflow is not running: resume the graph to run the new tasks",
  };
  return `Amend #${a.amend} applied: ${parts.join(', ')}; ${workflow[a.workflow] ?? `the graph is ${a.state}`}.`;
}

function Classification({ answer }: { answer: AmendAnswer }) {
  const c = answer.classification;
  const rerun = c.changed.length + c.dependent.length + c.added.length;
  return (
    <div class="amend-classification" aria-label="dry run">
      <p>
        <b data-rerun-count>{rerun === 0 ? 'Nothing would run again.' : `${rerun} task${rerun === 1 ? '' : 's'} would run again.`}</b>{' '}
        <span class="muted">Dry run: nothing was changed.</span>
      </p>
      <dl>
        {GROUPS.filter((g) => c[g.key].length > 0).map((g) => (
          <div key={g.key} class="amend-group" data-class={g.key}>
            <dt style={{ color: g.color }}>
              {g.title} ({c[g.key].length}) <span class="muted">— {g.what}</span>
            </dt>
            <dd>
              {c[g.key].slice(0, SHOWN_LABELS).map((label) => (
                <code key={label} class="amend-label">
                  {label}
                </code>
              ))}
              {c[g.key].length > SHOWN_LABELS && <span class="muted"> … and {c[g.key].length - SHOWN_LABELS} more</span>}
            </dd>
          </div>
        ))}
        <div class="amend-group" data-class="unchanged">
          <dt>unchanged</dt>
          <dd data-unchanged>{c.unchanged}</dd>
        </div>
      </dl>
      {(answer.mayBeKept?.length ?? 0) > 0 && (
        <p class="muted amend-may-be-kept">
          Of the dependents, {(answer.mayBeKept as string[]).length} may not run at all: {(answer.mayBeKept as string[]).slice(0, SHOWN_LABELS).join(', ')}
          {(answer.mayBeKept as string[]).length > SHOWN_LABELS ? ', …' : ''} keep their completed run if what they require comes out byte-identical
          (early cutoff).
        </p>
      )}
    </div>
  );
}

/** A refusal as the user reads it: the server's message in full, and for a 400 the labels it names. */
function Refusal({ error }: { error: unknown }) {
  const labels = error instanceof ApiError && Array.isArray(error.details?.labels) ? (error.details.labels as string[]) : [];
  return (
    <div class="action-result error amend-error" role="alert">
      <pre>{describeError(error)}</pre>
      {labels.length > 0 && <p>Labels to fix: {labels.join(', ')}</p>}
    </div>
  );
}

export function AmendPanel({ taskGraphId, onClose, onApplied }: { taskGraphId: string; onClose: () => void; onApplied: (answer: AmendAnswer) => void }) {
  const [file, setFile] = useState<GraphFile>();
  const [loadError, setLoadError] = useState<unknown>();
  const [text, setText] = useState('');
  /** the uploaded file's name (YAML is read by its .yml/.yaml ending, as the CLI reads it) */
  const [uploaded, setUploaded] = useState<string>();
  /** The dry run's answer and what it was of: Apply sends exactly that body. */
  const [checked, setChecked] = useState<{ text: string; body: PreparedAmend; answer: AmendAnswer }>();
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    const path = `/task-graph/${taskGraphId}/file`;
    // signed when signed in: a deployment may keep graph reads from anonymous callers
    const read = getCredentials() ? apiSigned<GraphFile>('scheduler', 'GET', path) : apiGet<GraphFile>('scheduler', path);
    read.then(
      (f) => {
        setFile(f);
        if (f.missing.length === 0) setText(JSON.stringify({ tasks: f.tasks }, null, 2));
      },
      (err: unknown) => setLoadError(err),
    );
  }, [taskGraphId]);

  const build = async (): Promise<PreparedAmend> => {
    // loaded when first used: YAML's parser is most of that module, and few visits amend
    const { parseGraphText, withTaskDefaults } = await import('../../client/graphFileText');
    const graph = parseGraphText(text, uploaded ?? 'the edited file');
    const now = Date.now();
    // what tgs graph amend fills in: a task's metadata.source is the graph's page
    const source = `${rootUrl}ui/task-graph/${taskGraphId}`;
    const tasks = withTaskDefaults(graph.tasks as Record<string, FileNode>, { now, owner: getCredentials()?.clientId ?? 'tgs-ui', source });
    return prepareAmend(file?.tasks ?? {}, tasks, now);
  };

  const send = async (dryRun: boolean) => {
    setBusy(true);
    setError(undefined);
    try {
      const body = dryRun || !checked ? await build() : checked.body;
      const answer = await apiSigned<AmendAnswer>('scheduler', 'PUT', `/task-graph/${taskGraphId}/amend${dryRun ? '?dryRun=true' : ''}`, { tasks: body.tasks });
      if (dryRun) setChecked({ text, body, answer });
      else onApplied(answer);
    } catch (err) {
      setError(err);
      if (dryRun) setChecked(undefined);
    } finally {
      setBusy(false);
    }
  };

  const upload = async (input: HTMLInputElement) => {
    const chosen = input.files?.[0];
    if (!chosen) return;
    setText(await chosen.text());
    setUploaded(chosen.name);
    setChecked(undefined);
  };

  const current = checked?.text === text ? checked : undefined;
  const tooLarge = text.length > EDITOR_LIMIT;
  const download = useMemo(() => (tooLarge ? URL.createObjectURL(new Blob([text], { type: 'application/json' })) : undefined), [text]);
  useEffect(() => () => download && URL.revokeObjectURL(download), [download]);
  return (
    <section class="amend-panel" aria-label="amend">
      <h2>Amend the graph</h2>
      <p class="muted">
        Edit the graph's file and send it whole: each label is compared with the task the graph holds, and only what
        changed runs again, with what depends on it. A label left out is removed.
      </p>
      {!file && !loadError && <p class="muted">Reading the graph's file…</p>}
      {loadError !== undefined && (
        <p class="error" role="alert">
          Cannot read the graph's file: {describeError(loadError)} Upload your file instead.
        </p>
      )}
      {file && file.missing.length > 0 && (
        <p class="amend-missing" role="note">
          {file.missing.length} task{file.missing.length === 1 ? ' was' : 's were'} stored before tgs kept each task's file (
          {file.missing.slice(0, 10).join(', ')}
          {file.missing.length > 10 ? ', …' : ''}): the graph cannot give its file back. Upload your graph file instead (every
          label in it: one left out is removed).
        </p>
      )}
      <div class="amend-tools">
        <label class="button">
          Upload file{' '}
          <input type="file" name="amend-upload" accept=".json,.yml,.yaml,application/json,application/yaml,text/yaml" onChange={(e) => void upload(e.currentTarget)} />
        </label>
        {uploaded && <span class="muted">{uploaded}</span>}
        {download && (
          <a class="button" download={`${taskGraphId}.json`} href={download}>
            Download the file
          </a>
        )}
      </div>
      {tooLarge ? (
        <p class="muted">
          The file is {(text.length / 1e6).toFixed(0)} MB: too large to edit here. Download it, edit it, and upload it (or use{' '}
          <code>tgs graph amend {taskGraphId} FILE</code>).
        </p>
      ) : (
        <textarea
          name="amend-file"
          class="amend-editor"
          spellcheck={false}
          rows={20}
          value={text}
          placeholder='{"tasks": {"<label>": {"requires": [], "task": {...}}}}'
          onInput={(e) => setText(e.currentTarget.value)}
        />
      )}
      <div class="amend-actions">
        <button name="amend-dry-run" disabled={busy || text.trim() === ''} onClick={() => void send(true)}>
          Dry run
        </button>{' '}
        <button name="amend-apply" class="primary" disabled={busy || !current} title={current ? undefined : 'Dry run this text first'} onClick={() => void send(false)}>
          Apply
        </button>{' '}
        <button name="amend-close" onClick={onClose}>
          Close
        </button>
        {busy && <span class="muted"> …</span>}
      </div>
      {error !== undefined && <Refusal error={error} />}
      {current && (
        <>
          <Classification answer={current.answer} />
          {current.body.retimed.length > 0 && (
            <p class="muted amend-retimed">
              <code>created</code> set to now for {current.body.retimed.length} edited or rerun label{current.body.retimed.length === 1 ? '' : 's'}{' '}
              (their new tasks keep the time they had: <code>deadline</code> and <code>expires</code> move with it).
            </p>
          )}
        </>
      )}
    </section>
  );
}
