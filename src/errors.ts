/**
 * Every error a client can see, with Taskcluster's codes and statuses. The API turns a TgsError into
 * Taskcluster's body `{code, message, requestInfo}`; anything else becomes a 500 InternalServerError.
 */
export const errorStatus = {
  InputError: 400,
  InputValidationError: 400,
  MalformedPayload: 400,
  AuthenticationFailed: 401,
  InsufficientScopes: 403,
  ResourceNotFound: 404,
  MethodNotAllowed: 405,
  RequestConflict: 409,
  ResourceExpired: 410,
  InputTooLarge: 413,
  ArtifactNotPresent: 424,
  InternalServerError: 500,
  ServiceUnavailable: 503,
} as const;

export type ErrorCode = keyof typeof errorStatus;

export class TgsError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = 'TgsError';
    this.code = code;
    this.details = details;
  }

  get status(): number {
    return errorStatus[this.code];
  }
}

export const inputError = (message: string, details?: Record<string, unknown>) =>
  new TgsError('InputError', message, details);
export const notFound = (message: string) => new TgsError('ResourceNotFound', message);
export const conflict = (message: string, details?: Record<string, unknown>) =>
  new TgsError('RequestConflict', message, details);
