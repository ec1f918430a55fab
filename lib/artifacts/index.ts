export { writeParquetArtifact, DEFAULT_ROW_GROUP_SIZE, type WriteParquetOptions } from './write-parquet';
export { writeJsonArtifact, readJsonArtifact, type JsonArtifactOptions } from './write-json';
export { manifestPathFor, readManifest, refFromManifest, type ManifestReadResult } from './manifest';
export { hashConfig, canonicalJson } from './config-hash';
export { codeVersion } from './code-version';
export { findCachedArtifact, checkCachedArtifact, type CacheExpectation, type CacheCheck } from './cache';
export { readRows, ROW_FILE_EXTENSIONS } from './read-rows';
export { readParquetTable, readParquetObjects, readParquetLayout, type ParquetLayout } from './read-parquet';
export { InputFileError } from './input-file-error';
export { ArrowRowError } from './rows-to-arrow';
export { sha256File } from './sha256-file';
export { writeFileAtomically, writeBytesAtomically, type AtomicWriteResult } from './atomic-write';
export {
  openAppendLog,
  readAppendLog,
  type AppendLog,
  type AppendLogContents,
  type MalformedLogLine,
} from './append-log';
export { sourceRef } from './source-ref';
export { readArtifactRows } from './artifact-rows';
