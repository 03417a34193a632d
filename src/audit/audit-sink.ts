/** The narrow view of the audit log the request path needs (the real one is src/audit/audit-log.ts). */
export interface AuditSink {
  record(event: string, fields: Record<string, unknown>): void
}
