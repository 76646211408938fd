import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as contract from '../../src/workflows/contract.js';
import { isResolved, MISSING_TASK_CHAR, TASK_STATE_CHAR, TASK_STATES, taskStateOfChar } from '../../src/taskStates.js';

test('the workflow contract keeps its wire names: Temporal-native callers and recorded histories use them', () => {
  const { resolutionsSignal, extendedSignal, tasksDefinedSignal, rerunSignal, cancelSignal, statusQuery, taskQuery } = contract;
  assert.equal(contract.WORKFLOW_TYPE, 'taskGraph');
  assert.deepEqual(
    [resolutionsSignal, extendedSignal, tasksDefinedSignal, rerunSignal, cancelSignal].map((s) => s.name),
    ['resolutions', 'extended', 'tasksDefined', 'rerun', 'cancel'],
  );
  assert.deepEqual([statusQuery, taskQuery].map((q) => q.name), ['status', 'task']);
  assert.equal(contract.rerunUpdate.name, 'rerunTask');
  assert.equal(contract.amendUpdate.name, 'amend');
  assert.equal(contract.INVALID_TASK_GRAPH, 'InvalidTaskGraph');
  assert.deepEqual(Object.values(contract.SEARCH_ATTRIBUTES), [
    { name: 'TaskGraphState', type: 'KEYWORD' },
    { name: 'TaskGraphSchedulerId', type: 'KEYWORD' },
  ]);
});

test('task states: exactly completed, failed and exception are resolved; each has its own character, read back', () => {
  assert.deepEqual(TASK_STATES.filter(isResolved), ['completed', 'failed', 'exception']);
  assert.equal(isResolved('waiting'), false);
  assert.equal(TASK_STATES.map((s) => TASK_STATE_CHAR[s]).join(''), 'uprcfe');
  for (const state of TASK_STATES) assert.equal(taskStateOfChar(TASK_STATE_CHAR[state]), state);
  assert.equal(taskStateOfChar(MISSING_TASK_CHAR), undefined);
});
