import { TgsError } from '../errors.js';

/**
 * Index paths (Taskcluster's namespaces): dot-separated parts of `[a-zA-Z0-9_!~*'()%-]`, no empty part, no slash;
 * at most 255 characters in all (what Taskcluster's answers allow a namespace). `a.b.c` is the entry `c` of the
 * namespace `a.b`.
 */
export const NAMESPACE = /^([a-zA-Z0-9_!~*'()%-]+\.)*[a-zA-Z0-9_!~*'()%-]+$/;
export const MAX_NAMESPACE_LENGTH = 255;

/** The route parameter's pattern: a namespace, or '' (the root) where a list allows it. */
export const NAMESPACE_PARAM = /^$|^(?=[\s\S]{1,255}$)([a-zA-Z0-9_!~*'()%-]+\.)*[a-zA-Z0-9_!~*'()%-]+$/;

export const isNamespace = (value: string) => value.length <= MAX_NAMESPACE_LENGTH && NAMESPACE.test(value);

/** Refuses what is not an index path, before any work, saying what one looks like. */
export function checkNamespace(value: string, what = 'index path'): void {
  if (!isNamespace(value)) {
    throw new TgsError(
      'InputError',
      `Invalid ${what} ${JSON.stringify(value.slice(0, 300))}: dot-separated parts of letters, digits and _!~*'()%-, at most ${MAX_NAMESPACE_LENGTH} characters`,
    );
  }
}

/** `a.b.c` → [`a.b`, `c`]; a path without a dot is an entry of the root namespace ''. */
export function splitNamespace(path: string): [namespace: string, name: string] {
  const dot = path.lastIndexOf('.');
  return dot < 0 ? ['', path] : [path.slice(0, dot), path.slice(dot + 1)];
}

/** The reverse of splitNamespace. */
export const joinNamespace = (namespace: string, name: string) => (namespace === '' ? name : `${namespace}.${name}`);
