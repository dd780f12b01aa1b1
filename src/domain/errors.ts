/** The error codes of the public contract, in `extensions.code`, whatever the transport. */
export const ErrorCode = {
  badUserInput: 'BAD_USER_INPUT',
  unauthenticated: 'UNAUTHENTICATED',
  forbidden: 'FORBIDDEN',
  rateLimited: 'RATE_LIMITED',
  notFound: 'NOT_FOUND',
  unavailable: 'SERVICE_UNAVAILABLE',
  /** A documentId the server has no persisted document for (src/trustedDocuments.ts): send the text. */
  persistedQueryNotFound: 'PERSISTED_QUERY_NOT_FOUND',
  persistedQueryNotSupported: 'PERSISTED_QUERY_NOT_SUPPORTED',
  /** Query text where GRAPHQL_TRUSTED_DOCUMENTS=only takes persisted documents alone. */
  persistedQueryOnly: 'PERSISTED_QUERY_ONLY',
  /** An HTTP request malformed before any GraphQL is read (Yoga's own code for them). */
  badRequest: 'BAD_REQUEST',
  /** A body over the caller's limit (src/guards/bodySize.ts; Yoga's own code for it). */
  requestTooLarge: 'REQUEST_ENTITY_TOO_LARGE',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** How long a client should wait before retrying after SERVICE_UNAVAILABLE (about a Redis restart). */
export const RETRY_AFTER_UNAVAILABLE_MS = 1000;

/** Where in the input an issue lies, and what is wrong there. */
export interface InputIssue {
  path?: (string | number)[];
  message: string;
  /** A machine code: TOO_SMALL, TOO_BIG, INVALID_FORMAT…, or the name of a flow's own rule (ENDS_BEFORE_STARTS…). */
  code?: string;
  minimum?: number;
  maximum?: number;
  /** The values a rule's wording uses (the product and total of an impossible split, say). */
  values?: Record<string, string | number>;
}

/**
 * A failure the caller is told about, thrown by the domain and infrastructure without
 * knowing the transport. Its message and `extensions` (the contract's code and hints)
 * are meant for the client; the edge (src/errorMasking.ts) answers with them as they
 * are, where anything else is masked. `extensions` is the name graphql-js reads on an
 * original error, so a resolver's throw keeps them with no mapping of its own.
 */
export abstract class DomainError extends Error {
  override name = this.constructor.name;
  abstract readonly extensions: Readonly<{ code: ErrorCode } & Record<string, unknown>>;
}

/**
 * A temporary failure the client should retry (a campaign being rebuilt, a commit that
 * could not be confirmed, Redis or PostgreSQL unreachable).
 */
export class ServiceUnavailableError extends DomainError {
  readonly retryAfterMs = RETRY_AFTER_UNAVAILABLE_MS;
  readonly extensions = { code: ErrorCode.unavailable, retryAfterMs: this.retryAfterMs };
  /** Worded in the caller's language already; a service's own are English, and masking words them for other callers. */
  readonly inCallerLanguage: boolean;

  constructor(message: string, { inCallerLanguage = false } = {}) {
    super(message);
    this.inCallerLanguage = inCallerLanguage;
  }
}

/** Input the contract has no problem type for: the same request would be refused again. */
export class BadInputError extends DomainError {
  readonly extensions: { code: typeof ErrorCode.badUserInput; issues?: InputIssue[] };

  constructor(
    message: string,
    readonly issues?: InputIssue[],
  ) {
    super(message);
    this.extensions = issues ? { code: ErrorCode.badUserInput, issues } : { code: ErrorCode.badUserInput };
  }

  /** One error for all the issues found, their messages joined. */
  static of(issues: InputIssue[]): BadInputError {
    return new BadInputError(issues.map((issue) => issue.message).join('; '), issues);
  }
}
