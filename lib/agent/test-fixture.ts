import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { AgentInstance } from '../../schemas/agent';
import type { ToolResult } from '../../schemas/tools';
import { runTool } from '../sandbox';
import { sharedData } from '../../test/support/repo-root';

/**
 * For the agent tests: a real SWE-bench Lite instance (astropy__astropy-12907, read from the shared data)
 * and a small worktree shaped like the part of astropy it concerns, written to a temp dir. The tools run on
 * it for real (ripgrep, the filesystem), so observations are real tool output.
 */

export const FIXTURE_INSTANCE_ID = 'astropy__astropy-12907';

export function fixtureInstance(): AgentInstance {
  const lines = readFileSync(path.join(sharedData, 'swebench_lite.jsonl'), 'utf8').split('\n');
  for (const line of lines) {
    if (!line.includes(FIXTURE_INSTANCE_ID)) continue;
    const row = JSON.parse(line) as { instance_id: string; repo: string; problem_statement: string };
    if (row.instance_id === FIXTURE_INSTANCE_ID) {
      return { instanceId: row.instance_id, repo: row.repo, problemStatement: row.problem_statement };
    }
  }
  throw new Error(`${FIXTURE_INSTANCE_ID} is not in ${sharedData}/swebench_lite.jsonl`);
}

export const SEPARABLE_PY = [
  '"""Functions to determine if a model is separable."""', // 1
  'import numpy as np', // 2
  'from .core import Model, ModelDefinitionError, CompoundModel', // 3
  '', // 4
  '', // 5
  'def is_separable(transform):', // 6
  '    separable_matrix = _separable(transform)', // 7
  '    return separable_matrix.sum(1) == 1', // 8
  '', // 9
  '', // 10
  'def separability_matrix(transform):', // 11
  '    separable_matrix = _separable(transform)', // 12
  '    return np.where(separable_matrix != 0, True, False)', // 13
  '', // 14
  '', // 15
  'def _cstack(left, right):', // 16
  '    noutp = _compute_n_outputs(left, right)', // 17
  '    cright = np.zeros((noutp, right.shape[1]))', // 18
  '    cright[-right.shape[0]:, -right.shape[1]:] = 1', // 19
  '    return np.hstack([left, cright])', // 20
  '', // 21
  '', // 22
  'def _separable(transform):', // 23
  '    if isinstance(transform, CompoundModel):', // 24
  '        return _operators[transform.op](_separable(transform.left), _separable(transform.right))', // 25
  '', // 26
  '', // 27
  "_operators = {'&': _cstack}", // 28
  '',
].join('\n');

export const CORE_PY = [
  'class ModelDefinitionError(TypeError):',
  '    pass',
  '',
  '',
  'class Model:',
  '    n_inputs = 1',
  '    n_outputs = 1',
  '',
  '',
  'class CompoundModel(Model):',
  '    def __init__(self, op, left, right):',
  '        self.op = op',
  '        self.left = left',
  '        self.right = right',
  '',
].join('\n');

export interface AgentFixture {
  root: string;
  instance: AgentInstance;
  cleanup(): Promise<void>;
}

export async function makeAgentFixture(): Promise<AgentFixture> {
  const parent = await mkdtemp(path.join(os.tmpdir(), 'codegrep-agent-'));
  const root = path.join(parent, 'astropy__astropy-12907');
  const files: Record<string, string> = {
    'astropy/__init__.py': '',
    'astropy/modeling/__init__.py': 'from .core import *\nfrom .separable import *\n',
    'astropy/modeling/separable.py': SEPARABLE_PY,
    'astropy/modeling/core.py': CORE_PY,
    'astropy/modeling/models.py': 'from .core import Model\n\n\nclass Linear1D(Model):\n    pass\n\n\nclass Pix2Sky_TAN(Model):\n    n_inputs = 2\n    n_outputs = 2\n',
    'astropy/modeling/tests/test_separable.py':
      'from astropy.modeling.separable import separability_matrix\n\n\ndef test_separable():\n    assert separability_matrix is not None\n',
    'setup.py': 'from setuptools import setup\nsetup()\n',
  };
  for (const [relative, content] of Object.entries(files)) {
    const file = path.join(root, relative);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, content);
  }
  return { root, instance: fixtureInstance(), cleanup: () => rm(parent, { recursive: true, force: true }) };
}

/** The real runTool, counting calls and the most that ran at once. */
export function countingRunner() {
  const stats = { calls: 0, inFlight: 0, peak: 0, names: [] as string[] };
  const runner = async (root: string, name: string, rawArgs: unknown): Promise<ToolResult> => {
    stats.calls += 1;
    stats.names.push(name);
    stats.inFlight += 1;
    stats.peak = Math.max(stats.peak, stats.inFlight);
    try {
      return await runTool(root, name, rawArgs);
    } finally {
      stats.inFlight -= 1;
    }
  };
  return { runner, stats };
}
