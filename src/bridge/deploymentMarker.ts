import type { Config } from '../config.js';
import type { BusChannel } from '../exchanges/bus.js';
import { BridgeQueueMismatchError } from './bridgeQueue.js';

// A deployment's marker on RabbitMQ (docs/deployments.md § Several deployments): the exchange
// `<prefix>tgs/deployment/<schedulerId>`, next to the bridge queue whose name it guards, declared with the
// argument `alternate-exchange: tgs:<deploymentId>`. Nothing is published to it. RabbitMQ compares that
// argument when an exchange is declared again and refuses another value with PRECONDITION_FAILED (406), as the
// in-process bus does (src/exchanges/busMemory.ts): a second deployment with the same exchange prefix and
// schedulerId on one vhost, which would share the bridge queue and take the first one's resolutions, is refused.

export const deploymentMarkerName = (config: Pick<Config, 'exchangePrefix' | 'schedulerId'>) => `${config.exchangePrefix}tgs/deployment/${config.schedulerId}`;
// short: AMQP cuts the refusal's text at 255 characters, and the other deployment's id comes last in it
const markerArgument = (deploymentId: string) => `tgs:${deploymentId}`;

/** The bridge found another deployment's marker: its message is the one line to show, with the fix. */
export class DeploymentMarkerConflictError extends BridgeQueueMismatchError {
  constructor(message: string) {
    super(message);
    this.name = 'DeploymentMarkerConflictError';
  }
}

/** The other deployment's id as RabbitMQ's refusal names it ("… received '…' but current is 'tgs:<id>'"), if the text kept it. */
export function markerOwner(refusal: string): string | undefined {
  return /current is (?:the value )?'tgs:([^']+)'/.exec(refusal)?.[1];
}

export function markerConflictMessage(config: Pick<Config, 'exchangePrefix' | 'schedulerId'>, mine: string, other: string | undefined): string {
  const name = deploymentMarkerName(config);
  return (
    `bridge: refusing to start: this RabbitMQ vhost already has another tgs deployment (${other ? `deployment ${other}` : 'another deployment id'}) ` +
    `with TGS_EXCHANGE_PREFIX "${config.exchangePrefix}" and TGS_SCHEDULER_ID "${config.schedulerId}"; this one is deployment ${mine} (its own database), ` +
    `and the two would take each other's resolutions from one bridge queue. Give this deployment its own TGS_EXCHANGE_PREFIX ` +
    `(or TGS_SCHEDULER_ID, or a vhost of its own in AMQP_URL), and its own TGS_TASK_QUEUE or TEMPORAL_NAMESPACE if it shares Temporal too ` +
    `(docs/deployments.md § Several deployments). If that other deployment no longer exists, delete its marker: ` +
    `rabbitmqadmin delete exchange name='${name}'`
  );
}

/**
 * Declares this deployment's marker on `ch`; another deployment's marker there throws DeploymentMarkerConflictError
 * (the channel is closed by then, as after any 406).
 */
export async function declareDeploymentMarker(ch: BusChannel, config: Pick<Config, 'exchangePrefix' | 'schedulerId'>, deploymentId: string): Promise<void> {
  try {
    await ch.assertExchange(deploymentMarkerName(config), 'topic', { durable: true, arguments: { 'alternate-exchange': markerArgument(deploymentId) } });
  } catch (err) {
    if ((err as { code?: unknown } | null)?.code !== 406) throw err;
    throw new DeploymentMarkerConflictError(markerConflictMessage(config, deploymentId, markerOwner((err as Error).message)));
  }
}
