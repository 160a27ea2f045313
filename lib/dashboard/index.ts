// nestjs-periodic/dashboard: a web page of every job, with actions for operators, and the JSON API it uses.
export { PeriodicDashboardModule } from './module.js';
export type { PeriodicDashboardAccess, PeriodicDashboardOptions } from './options.js';
export type { PeriodicDashboardJob, PeriodicDashboardJobDetail } from './views.js';
