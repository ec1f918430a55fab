import { describe, expect, it } from 'vitest';
import { EDITOR_LIMITS } from '../../sandbox/limits';
import { builtinAgentTools, EDITOR_TOOL_DESCRIPTION } from './builtin-tools';

describe('builtinAgentTools', () => {
  it('offers terminal, the editor and submit, and tells the model the editor limits it will meet', () => {
    expect(builtinAgentTools().map((t) => t.function.name)).toEqual(['terminal', 'str_replace_editor', 'submit']);
    expect(EDITOR_TOOL_DESCRIPTION).toContain(`files up to ${EDITOR_LIMITS.maxFileBytes / 1024 / 1024} MiB`);
    expect(EDITOR_TOOL_DESCRIPTION).toContain(`at most ${EDITOR_LIMITS.maxCreatedFilesPerEpisode} new files per run`);
    expect(EDITOR_TOOL_DESCRIPTION).toContain(`up to ${EDITOR_LIMITS.maxEditStringBytes / 1024} KiB`);
  });
});
