import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../../schemas/config';
import type { EvaluationConfig } from '../../schemas/evaluation';

/**
 * The evaluation section with its paths resolved against `baseDir` (the worker's working directory, or the
 * config file's folder for the CLI): a predictions file must be an existing file and a dense model dir an
 * existing folder, checked before anything runs so a typo fails at once, naming the retriever.
 */
export function resolveEvaluationPaths(evaluation: EvaluationConfig, baseDir: string, source: string): EvaluationConfig {
  const problems: string[] = [];
  const retrievers = evaluation.retrievers.map((retriever, i) => {
    if (retriever.kind === 'predictions') {
      const file = path.resolve(baseDir, retriever.path);
      if (!existsSync(file) || !statSync(file).isFile())
        problems.push(`  evaluation.retrievers.${i}.path: predictions file ${file} (retriever "${retriever.name}") does not exist`);
      return { ...retriever, path: file };
    }
    if (retriever.kind === 'dense') {
      const dir = path.resolve(baseDir, retriever.modelDir);
      if (!existsSync(dir) || !statSync(dir).isDirectory()) {
        problems.push(
          `  evaluation.retrievers.${i}.modelDir: dense: model dir required, and ${dir} (retriever "${retriever.name}") is not a folder`,
        );
      }
      return { ...retriever, modelDir: dir };
    }
    return retriever;
  });
  if (problems.length > 0) throw new ConfigError(`invalid config ${source}:\n${problems.join('\n')}`);
  return { ...evaluation, retrievers };
}
