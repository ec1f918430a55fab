import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AGENT_PREDICTIONS_SCHEMA_NAME,
  AGENT_PREDICTIONS_SCHEMA_VERSION,
  AgentPredictionRowSchema,
  agentPredictionsArrowSchema,
  type EpisodeResult,
} from '../../schemas/agent';
import { readParquetObjects, writeParquetArtifact } from '../artifacts';
import { locationsToSets } from '../metrics/levels';
import { createEpisode, type AssistantTurn } from './episode';
import { episodeToPredictionRow } from './prediction-row';
import { makeAgentFixture, type AgentFixture } from '../../test/fixtures/agent/fixture';

let fixture: AgentFixture;
beforeAll(async () => {
  fixture = await makeAgentFixture();
});
afterAll(async () => {
  await fixture.cleanup();
});

async function play(answerFormat: 'codegrep' | 'codescout', replies: AssistantTurn[]): Promise<EpisodeResult> {
  const episode = createEpisode({ instance: fixture.instance, worktreeRoot: fixture.root, answerFormat });
  for (const reply of replies) await episode.step(reply);
  return episode.result();
}

describe('episodeToPredictionRow', () => {
  it('round-trips CodeGrep, CodeScout and invalid predictions through a real Parquet artifact', async () => {
    const usage = { promptTokens: 1000, completionTokens: 50 };
    const codegrep = await play('codegrep', [
      { text: '', toolCalls: [{ name: 'grep', arguments: '{"pattern": "_cstack"}' }], usage },
      {
        text: '<answer>{"files": ["astropy/modeling/separable.py"], "line_ranges": ["astropy/modeling/separable.py:16-20"]}</answer>',
        usage,
      },
    ]);
    const codescout = await play('codescout', [
      {
        text: '',
        toolCalls: [
          {
            name: 'localization_finish',
            arguments: JSON.stringify({
              locations: [
                { file: 'astropy/modeling/separable.py', function_name: '_cstack' },
                { file: 'astropy/modeling/core.py', class_name: 'CompoundModel', function_name: '__init__' },
                { file: 'astropy/modeling/separable.py', function_name: 'separability_matrix' },
              ],
            }),
          },
        ],
      },
    ]);
    const invalid = await play('codegrep', [{ text: '<answer>{"files": "astropy"}</answer>' }]);

    const rows = [
      episodeToPredictionRow(codegrep, 'codegrep-v3'),
      episodeToPredictionRow(codescout, 'codescout-14b'),
      episodeToPredictionRow(invalid, 'codegrep-v3'),
    ];
    expect(rows[1]!.files).toEqual(['astropy/modeling/separable.py', 'astropy/modeling/core.py']);
    expect(rows[2]).toMatchObject({ files: [], lineRanges: [], locations: [], answerValid: false, endReason: 'invalid_answer' });

    const dir = path.join(path.dirname(fixture.root), 'artifacts');
    const ref = await writeParquetArtifact({
      path: path.join(dir, 'predictions.parquet'),
      schemaName: AGENT_PREDICTIONS_SCHEMA_NAME,
      schemaVersion: AGENT_PREDICTIONS_SCHEMA_VERSION,
      arrowSchema: agentPredictionsArrowSchema,
      rows,
      inputs: [],
      configHash: 'a'.repeat(64),
    });
    expect(ref.rows).toBe(3);
    const back = (await readParquetObjects(ref.uri)).map((row) => AgentPredictionRowSchema.parse(row));
    expect(back).toEqual(rows);
    expect(back[0]).toMatchObject({
      lineRanges: [{ path: 'astropy/modeling/separable.py', start: 16, end: 20 }],
      turns: 2,
      toolCalls: 1,
      promptTokens: 2000,
      completionTokens: 100,
      endReason: 'answer',
    });
    expect(back[2]!.answerError).toMatch(/files must be a list of path strings/);
    // The locations column feeds lib/metrics as it is.
    expect(locationsToSets(back[1]!.locations)).toEqual({
      files: ['astropy/modeling/separable.py', 'astropy/modeling/core.py'],
      modules: ['astropy/modeling/core.py:CompoundModel'],
      functions: [
        'astropy/modeling/separable.py:_cstack',
        'astropy/modeling/core.py:CompoundModel.__init__',
        'astropy/modeling/separable.py:separability_matrix',
      ],
    });
  });

  it('refuses an empty retriever name', async () => {
    const result = await play('codegrep', [{ text: 'no idea' }]);
    expect(() => episodeToPredictionRow(result, ' ')).toThrow(/retriever must name the retriever/);
  });
});
