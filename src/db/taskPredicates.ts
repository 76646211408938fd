/**
 * SQL: the task row (of `alias`) is pending, or unresolved (unscheduled, pending or running), written as the
 * partial indexes' predicates are (migration 019: functions whose selectivity the planner does not take from stale
 * statistics). A statement that wants those indexes says this, not `state = 'pending'`.
 */
export const isPendingSql = (alias = '') => `tgs_task_pending(${alias ? `${alias}.` : ''}state)`;
export const isUnresolvedSql = (alias = '') => `tgs_task_unresolved(${alias ? `${alias}.` : ''}state)`;
