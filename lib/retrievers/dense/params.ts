/**
 * Defaults of the dense embedding retriever. CodeGrep's dense baseline is Jina Code Embeddings 1.5B (§4.1,
 * Table 2, Table 3 "Jina-1.5B top-2"); the paper does not describe its chunking or batching, so those are
 * engineering choices, each stated here and nowhere else.
 */

/**
 * Files returned per query. CodeGrep Table 3 injects "BM25 top-2" and "Jina-1.5B top-2"; App. E gives the
 * reason for K = 2 (it matches CodeGrep v3's mean output of 1.31 files). The one definition lives with BM25.
 */
export { DEFAULT_TOP_K } from '../bm25/params';

/** Token sequences per onnxruntime call. */
export const DEFAULT_BATCH_SIZE = 16;

/**
 * Tokens shared by consecutive chunks of a long file, as a fraction of the chunk's content window (rounded
 * down): a definition cut by a chunk boundary still appears whole in one of the two chunks when it is
 * shorter than the overlap.
 */
export const DEFAULT_CHUNK_OVERLAP_FRACTION = 1 / 8;

/**
 * A model's `model_max_length` above this is the "no limit" sentinel transformers writes (1e30), not a limit.
 */
export const MAX_PLAUSIBLE_SEQUENCE_LENGTH = 1_000_000;
