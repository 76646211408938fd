import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * Trigger tokens at rest (docs/formats.md § Hooks). getTriggerToken must answer the token, so it cannot be a one-way
 * hash; with TGS_HOOK_TOKEN_KEY set (32 bytes, base64) it is stored sealed with AES-256-GCM, the hook's ids as
 * associated data (a sealed token copied onto another hook's row does not open). Unset, it is stored as it is. A
 * sealed token reads `aes256gcm:<iv>:<tag>:<ciphertext>` (base64url); a slugid never holds `:`, so a token stored
 * before the key was set still reads as itself, and is sealed when resetTriggerToken replaces it.
 */

const PREFIX = 'aes256gcm:';

const aad = (hook: { hookGroupId: string; hookId: string }) => Buffer.from(JSON.stringify([hook.hookGroupId, hook.hookId]));

/** The token as stored: sealed with `key`, or as it is without one. */
export function sealToken(key: Buffer | undefined, hook: { hookGroupId: string; hookId: string }, token: string): string {
  if (!key) return token;
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(aad(hook));
  const sealed = Buffer.concat([cipher.update(token, 'utf8'), cipher.final()]);
  return `${PREFIX}${iv.toString('base64url')}:${cipher.getAuthTag().toString('base64url')}:${sealed.toString('base64url')}`;
}

/** The token a stored value holds. Throws for a sealed one when the key is unset or is not the one it was sealed with. */
export function openToken(key: Buffer | undefined, hook: { hookGroupId: string; hookId: string }, stored: string): string {
  if (!stored.startsWith(PREFIX)) return stored;
  if (!key) throw new Error(`the trigger token of ${hook.hookGroupId}/${hook.hookId} is stored encrypted and TGS_HOOK_TOKEN_KEY is not set`);
  const [iv, tag, sealed] = stored.slice(PREFIX.length).split(':').map((part) => Buffer.from(part, 'base64url'));
  const decipher = createDecipheriv('aes-256-gcm', key, iv);
  decipher.setAAD(aad(hook));
  decipher.setAuthTag(tag);
  try {
    return Buffer.concat([decipher.update(sealed), decipher.final()]).toString('utf8');
  } catch {
    throw new Error(`the trigger token of ${hook.hookGroupId}/${hook.hookId} does not open with TGS_HOOK_TOKEN_KEY (a different key sealed it)`);
  }
}
