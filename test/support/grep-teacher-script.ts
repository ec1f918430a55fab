import type { ChatRequestBody, ScriptedReply } from './scripted-openai-server';
import { reply } from './scripted-openai-server';
import { answerText, teacherTurn, type TeacherMessage } from '../../lib/learn-task/grep-teacher';

/** The grep teacher (grep-teacher.ts) as a script of the test suite's scripted OpenAI server. */
export function componentTeacher(body: ChatRequestBody): ScriptedReply {
  const turn = teacherTurn((body.messages ?? []) as TeacherMessage[]);
  return turn.kind === 'grep'
    ? reply.toolCalls([{ name: 'grep', arguments: { pattern: turn.pattern } }])
    : reply.text(answerText(turn.files));
}
