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
  TooManyRequests: 429,
  InternalServerError: 500,
  ServiceUnavailable: 503,
} as const;

export type ErrorCode = keyof typeof errorStatus;

/** An error a client sees, made where it happens: `throw new TgsError('ResourceNotFound', 'no such task')`. */
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
