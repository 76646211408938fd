// The rules every deployment description the project ships must keep (docker-compose.yml, the Helm chart in
// deploy/helm/tgs), written once: test/deploy/compose.test.ts and test/deploy/helm.test.ts apply them.
import type { Command, Option } from 'commander';
import { buildProgram } from '../../src/cli/main.js';

/**
 * Checks `tgs <args>` against the real commander program: each word names a (sub)command, the last one has no
 * subcommands, every --option exists on it (skipping its value), required options and arguments are given.
 */
export function checkTgsCommand(args: string[], program: Command = buildProgram()): string[] {
  const problems: string[] = [];
  let cmd = program;
  let i = 0;
  for (; i < args.length && !args[i].startsWith('-'); i++) {
    const sub = cmd.commands.find((c) => c.name() === args[i] || c.aliases().includes(args[i]));
    if (!sub) break;
    cmd = sub;
  }
  const path = args.slice(0, i).join(' ');
  if (cmd === program) return [`"${args[0]}" is not a tgs command (${program.commands.map((c) => c.name()).join(', ')})`];
  if (cmd.commands.length > 0) return [`tgs ${path} needs a subcommand (${cmd.commands.map((c) => c.name()).join(', ')})`];
  const options = cmd.options as Option[];
  const given = new Set<string>();
  const positionals: string[] = [];
  for (; i < args.length; i++) {
    const word = args[i];
    if (!word.startsWith('-')) {
      positionals.push(word);
      continue;
    }
    const [flag, inline] = word.split('=', 2);
    const option = options.find((o) => o.long === flag || o.short === flag);
    if (!option) {
      problems.push(`tgs ${path}: unknown option ${flag}`);
      continue;
    }
    given.add(option.long as string);
    if ((option.required || option.optional) && inline === undefined) i++;
  }
  for (const o of options) if (o.mandatory && !given.has(o.long as string)) problems.push(`tgs ${path}: missing required ${o.long}`);
  const required = cmd.registeredArguments.filter((a) => a.required).length;
  if (positionals.length < required) problems.push(`tgs ${path}: needs ${required} argument(s), got ${positionals.length}`);
  if (positionals.length > cmd.registeredArguments.length && !cmd.registeredArguments.at(-1)?.variadic) {
    problems.push(`tgs ${path}: too many arguments (${positionals.join(' ')})`);
  }
  return problems;
}

/**
 * Where a tgs process answers its health check: the API its load-balancer heartbeat on PORT (200 while it serves;
 * a stopping API answers a new connection 503, src/api/gracefulStop.ts), every other process `/health` on its
 * metrics port (src/observability/metricsServer.ts), which exists only when TGS_METRICS_PORT is set.
 */
export function healthEndpoint(command: string[], env: Record<string, string | undefined>): { port: number; path: string } | { problem: string } {
  if (command[0] === 'api') return { port: Number(env.PORT ?? 8080), path: '/api/queue/v1/__lbheartbeat__' };
  const port = Number(env.TGS_METRICS_PORT ?? 0);
  if (!port) return { problem: `tgs ${command[0]} serves /health only with TGS_METRICS_PORT set` };
  return { port, path: '/health' };
}

/** Passwords everyone tries first, among them every default this project or its images ever shipped. */
export const WELL_KNOWN_PASSWORDS = ['tgs', 'postgres', 'guest', 'password', 'changeme', 'temporal', 'admin', 'root', 'secret', 'rabbitmq', 'test', '123456', 'letmein'];

/**
 * An environment variable whose value is a password (must come from a required reference) or a token (a
 * reference, or empty). Only variable-like names (UPPER_SNAKE) are judged: `passwordKey: password` in a values file
 * names a key of a Secret, not a password.
 */
const ENV_NAME = /^[A-Z][A-Z0-9_]*$/;
const PASSWORD_KEY = /PASS(WORD)?$|_PWD$|PASSWORD/;
const TOKEN_KEY = /TOKEN|SECRET|API_?KEY/;

export interface SecretSyntax {
  /** the description's way of saying "a value from elsewhere that must be given" (compose: `${VAR:?message}`) */
  required(value: string): boolean;
  /** a reference that may be left empty (compose: `${VAR:-}`): allowed for tokens only, never a default */
  optionalEmpty(value: string): boolean;
}

export const composeSecrets: SecretSyntax = {
  required: (value) => /^\$\{[A-Z0-9_]+:\?[^}]+\}$/.test(value),
  optionalEmpty: (value) => /^\$\{[A-Z0-9_]+:-\}$/.test(value),
};

/** Kubernetes manifests: a secret is never a literal `value` (it comes `valueFrom` a Secret); `$(VAR)` refers to one. */
export const kubernetesSecrets: SecretSyntax = {
  required: (value) => /^\$\([A-Z0-9_]+\)$/.test(value),
  optionalEmpty: (value) => value === '',
};

/**
 * Every literal secret in a parsed description: a password variable whose value is not a required reference, a
 * token variable with a literal value, a URL with a password that is not a required reference, and any well-known
 * password in such a variable or URL. Variables are `KEY: value` mappings, `KEY=value` list items and Kubernetes'
 * `{name: KEY, value: ...}` entries.
 */
export function secretProblems(tree: unknown, syntax: SecretSyntax): string[] {
  const problems: string[] = [];
  const judge = (at: string, k: string, v: string) => {
    if (ENV_NAME.test(k) && (PASSWORD_KEY.test(k) || TOKEN_KEY.test(k))) {
      if (WELL_KNOWN_PASSWORDS.includes(v.toLowerCase())) problems.push(`${at}: ${k} is the well-known password ${JSON.stringify(v)}`);
      else if (PASSWORD_KEY.test(k) && !syntax.required(v)) problems.push(`${at}: ${k} must be a required reference, not ${JSON.stringify(v)}`);
      else if (!PASSWORD_KEY.test(k) && !syntax.required(v) && !syntax.optionalEmpty(v)) problems.push(`${at}: ${k} must be a reference, not ${JSON.stringify(v)}`);
    }
    for (const m of v.matchAll(/[a-z][a-z0-9+.-]*:\/\/([^/@\s:]*):(\$\{[^}]*\}|\$\([^)]*\)|[^@\s/]*)@/gi)) {
      if (WELL_KNOWN_PASSWORDS.includes(m[2].toLowerCase())) problems.push(`${at}: the well-known password ${JSON.stringify(m[2])} in a URL`);
      else if (!syntax.required(m[2])) problems.push(`${at}: the password in ${JSON.stringify(m[0])} must be a required reference`);
    }
  };
  const visit = (node: unknown, at: string, key: string) => {
    if (Array.isArray(node)) return node.forEach((item, i) => visit(item, `${at}[${i}]`, key));
    if (node && typeof node === 'object') {
      const entry = node as Record<string, unknown>;
      if (typeof entry.name === 'string' && typeof entry.value === 'string') judge(at, entry.name, entry.value);
      for (const [k, v] of Object.entries(entry)) if (!(k === 'value' && typeof entry.name === 'string')) visit(v, at ? `${at}.${k}` : k, k);
      return;
    }
    if (typeof node !== 'string') return;
    const pair = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(node);
    if (pair) judge(at, pair[1], pair[2]);
    else judge(at, key, node);
  };
  visit(tree, '', '');
  return problems;
}
