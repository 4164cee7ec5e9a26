/**
 * Roles of the page's users, each including the one before: a viewer reads everything; an operator
 * also works the exception queue, proposes decisions and imports files (bank statements, the provider's
 * reports); a controller also prepares, signs and approves month closes and approves (or rejects) a
 * decision that re-books the ledger, never their own. A user configured without a role is an operator
 * (what every user could do before roles existed).
 */
export const WEB_ROLES = ['viewer', 'operator', 'controller'] as const;
export type WebRole = (typeof WEB_ROLES)[number];
export const DEFAULT_WEB_ROLE: WebRole = 'operator';

/** What a role may do beyond reading. */
export type WebPermission = 'work-exceptions' | 'sign-close' | 'approve-booking' | 'import-files';

const NEEDS: Record<WebPermission, WebRole> = {
  'work-exceptions': 'operator',
  'import-files': 'operator',
  'sign-close': 'controller',
  'approve-booking': 'controller',
};

export function roleCan(role: WebRole, permission: WebPermission): boolean {
  return WEB_ROLES.indexOf(role) >= WEB_ROLES.indexOf(NEEDS[permission]);
}
