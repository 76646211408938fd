import { Context } from '@temporalio/activity';
import protoModule from '@temporalio/proto';
import type { CancelRequestOrigin } from '../workflows/activityContract.js';
import { workflowIdFor } from '../workflows/contract.js';

const { EventType } = protoModule.temporal.api.enums.v1;

/**
 * Who asked Temporal to cancel this run of the graph's workflow: the newest WorkflowExecutionCancelRequested event
 * of its history, read backwards (it is among the last few events), through the worker's client. The workflow SDK
 * hands the workflow neither the identity nor the reason. Best effort: empty when the history cannot be read.
 */
export async function cancelRequestOf(taskGraphId: string, runId: string): Promise<CancelRequestOrigin> {
  try {
    const { client } = Context.current();
    let nextPageToken: Uint8Array | undefined;
    for (let page = 0; page < 5; page++) {
      const response = await client.workflowService.getWorkflowExecutionHistoryReverse({
        namespace: client.options.namespace,
        execution: { workflowId: workflowIdFor(taskGraphId), runId },
        maximumPageSize: 100,
        nextPageToken,
      });
      for (const event of response.history?.events ?? []) {
        if (event.eventType !== EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED) continue;
        const attributes = event.workflowExecutionCancelRequestedEventAttributes;
        return {
          ...(attributes?.identity ? { identity: attributes.identity } : {}),
          ...(attributes?.cause ? { reason: attributes.cause } : {}),
        };
      }
      if (!response.nextPageToken?.length) break;
      nextPageToken = response.nextPageToken;
    }
  } catch {
    // the reason is a courtesy: the cancellation goes ahead without it
  }
  return {};
}
