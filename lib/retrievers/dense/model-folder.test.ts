import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelFolderError, readModelFolder } from './model-folder';
import { writeJson } from '../../../test/fixtures/retrievers/dense-fixture';

// Config-level behaviour on hand-written folders: readModelFolder reads files and JSON only (the ONNX graph
// is opened by loadEmbeddingModel, tested with a real model in embedding-model.test.ts).

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'dense-model-folder-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

const MODULES = [
  { idx: 0, name: '0', path: '', type: 'sentence_transformers.models.Transformer' },
  { idx: 1, name: '1', path: '1_Pooling', type: 'sentence_transformers.models.Pooling' },
  { idx: 2, name: '2', path: '2_Normalize', type: 'sentence_transformers.models.Normalize' },
];

/** A complete folder (mean pooling, Normalize, max_seq_length 128), then `edit`. */
async function folder(edit: (dir: string) => Promise<void> = async () => undefined): Promise<string> {
  const dir = await mkdtemp(path.join(tmp, 'model-'));
  await mkdir(path.join(dir, 'onnx'));
  await writeFile(path.join(dir, 'onnx/model.onnx'), 'graph bytes');
  await writeJson(dir, 'tokenizer.json', { version: '1.0', model: { type: 'WordPiece' } });
  await writeJson(dir, 'modules.json', MODULES);
  await writeJson(dir, '1_Pooling/config.json', { pooling_mode_mean_tokens: true, pooling_mode_cls_token: false });
  await writeJson(dir, 'sentence_bert_config.json', { max_seq_length: 128 });
  await writeJson(dir, 'config.json', { max_position_embeddings: 512 });
  await edit(dir);
  return dir;
}

describe('readModelFolder', () => {
  it('reads pooling, normalisation and the maximum length of a sentence-transformers folder', async () => {
    const dir = await folder();
    const model = await readModelFolder(dir);
    expect(model.onnxPath).toBe(path.join(dir, 'onnx/model.onnx'));
    expect(model.pooling).toEqual(['mean']);
    expect(model.normalize).toBe(true);
    expect(model.maxSequenceLength).toBe(128);
    expect(model.queryPrompt).toBe('');
    expect(model.files.map((f) => path.relative(dir, f))).toEqual(
      ['1_Pooling/config.json', 'config.json', 'modules.json', 'onnx/model.onnx', 'sentence_bert_config.json', 'tokenizer.json'].sort(),
    );
  });

  it('prefers model.onnx at the root and counts external-data files as part of the graph', async () => {
    const dir = await folder(async (d) => {
      await writeFile(path.join(d, 'model.onnx'), 'root graph');
      await writeFile(path.join(d, 'model.onnx_data'), 'weights');
    });
    const model = await readModelFolder(dir);
    expect(model.onnxPath).toBe(path.join(dir, 'model.onnx'));
    expect(model.files).toContain(path.join(dir, 'model.onnx_data'));
  });

  it('CLS pooling, several modes, no Normalize module', async () => {
    const dir = await folder(async (d) => {
      await writeJson(d, 'modules.json', MODULES.slice(0, 2));
      await writeJson(d, '1_Pooling/config.json', { pooling_mode_cls_token: true, pooling_mode_mean_tokens: false });
    });
    expect(await readModelFolder(dir)).toMatchObject({ pooling: ['cls'], normalize: false });
    const several = await folder(async (d) =>
      writeJson(d, '1_Pooling/config.json', { pooling_mode_mean_tokens: true, pooling_mode_max_tokens: true }),
    );
    expect((await readModelFolder(several)).pooling).toEqual(['max', 'mean']);
  });

  it('takes the maximum length from the tokenizer and transformer configs when sentence_bert_config.json is absent', async () => {
    const dir = await folder(async (d) => {
      await rm(path.join(d, 'sentence_bert_config.json'));
      await writeJson(d, 'tokenizer_config.json', { model_max_length: 1e30 }); // transformers' "no limit"
    });
    expect((await readModelFolder(dir)).maxSequenceLength).toBe(512);
    const tokenizerLimited = await folder(async (d) => {
      await rm(path.join(d, 'sentence_bert_config.json'));
      await writeJson(d, 'tokenizer_config.json', { model_max_length: 256 });
    });
    expect((await readModelFolder(tokenizerLimited)).maxSequenceLength).toBe(256);
    const none = await folder(async (d) => {
      await rm(path.join(d, 'sentence_bert_config.json'));
      await writeJson(d, 'config.json', {});
    });
    await expect(readModelFolder(none)).rejects.toThrow(/no maximum sequence length .*pass maxSequenceLength/);
  });

  it('reads query and document prompts from config_sentence_transformers.json; overrides win', async () => {
    const dir = await folder(async (d) =>
      writeJson(d, 'config_sentence_transformers.json', { prompts: { query: 'Query: ', passage: 'Code: ' } }),
    );
    expect(await readModelFolder(dir)).toMatchObject({ queryPrompt: 'Query: ', documentPrompt: 'Code: ' });
    expect(await readModelFolder(dir, { queryPrompt: '', pooling: ['cls'], normalize: false, maxSequenceLength: 64 })).toMatchObject({
      queryPrompt: '',
      documentPrompt: 'Code: ',
      pooling: ['cls'],
      normalize: false,
      maxSequenceLength: 64,
    });
  });

  it('names the directory and the missing file', async () => {
    const missing = path.join(tmp, 'no-such-model');
    await expect(readModelFolder(missing)).rejects.toThrow(`embedding model directory ${missing} does not exist`);
    const file = path.join(tmp, 'a-file');
    await writeFile(file, '');
    await expect(readModelFolder(file)).rejects.toThrow(/is not a directory/);

    const noGraph = await folder(async (d) => rm(path.join(d, 'onnx'), { recursive: true }));
    await expect(readModelFolder(noGraph)).rejects.toThrow(
      `embedding model ${noGraph}: no ONNX graph (looked for model.onnx and onnx/model.onnx)`,
    );
    const noTokenizer = await folder(async (d) => rm(path.join(d, 'tokenizer.json')));
    await expect(readModelFolder(noTokenizer)).rejects.toThrow(`embedding model ${noTokenizer}: tokenizer.json is missing`);
    const noModules = await folder(async (d) => rm(path.join(d, 'modules.json')));
    await expect(readModelFolder(noModules)).rejects.toThrow(`embedding model ${noModules}: modules.json is missing`);
    // ... which explicit pooling and normalisation make unnecessary.
    await expect(readModelFolder(noModules, { pooling: ['mean'], normalize: true })).resolves.toMatchObject({ pooling: ['mean'] });
    const noPoolingConfig = await folder(async (d) => rm(path.join(d, '1_Pooling'), { recursive: true }));
    await expect(readModelFolder(noPoolingConfig)).rejects.toThrow(`embedding model ${noPoolingConfig}: 1_Pooling/config.json is missing`);
  });

  it('refuses malformed configs and modules it cannot run', async () => {
    const badJson = await folder(async (d) => writeFile(path.join(d, 'modules.json'), '[{"path": '));
    await expect(readModelFolder(badJson)).rejects.toThrow(/modules.json is not valid JSON/);
    const badShape = await folder(async (d) => writeJson(d, 'modules.json', { modules: [] }));
    await expect(readModelFolder(badShape)).rejects.toThrow(/modules.json is malformed/);
    const dense = await folder(async (d) =>
      writeJson(d, 'modules.json', [...MODULES, { idx: 3, name: '3', path: '3_Dense', type: 'sentence_transformers.models.Dense' }]),
    );
    await expect(readModelFolder(dense)).rejects.toThrow(/cannot run: sentence_transformers.models.Dense/);
    const weighted = await folder(async (d) => writeJson(d, '1_Pooling/config.json', { pooling_mode_weightedmean_tokens: true }));
    await expect(readModelFolder(weighted)).rejects.toThrow(/weighted-mean pooling/);
    const noMode = await folder(async (d) => writeJson(d, '1_Pooling/config.json', { pooling_mode_mean_tokens: false }));
    await expect(readModelFolder(noMode)).rejects.toThrow(/turns on no pooling mode/);
    const tiny = await folder();
    await expect(readModelFolder(tiny, { maxSequenceLength: 1 })).rejects.toThrow(/integer >= 2/);
    for (const error of [badJson, dense].map((d) => readModelFolder(d).catch((e: unknown) => e))) {
      expect(await error).toBeInstanceOf(ModelFolderError);
    }
  });
});
