// Workflow bundle entry: every workflow type the scheduler worker serves.
export { taskGraph } from './taskGraph.js';
export { hookFire } from './hookFire.js';
