/**
 * The BM25 baseline's parameters, exactly as CodeGrep App. E ("BM25 Baseline Configuration") states them.
 * Each lives here and nowhere else.
 */

/** BM25 Okapi term-frequency saturation, rank_bm25's default. App. E, "BM25 parameters". */
export const BM25_K1 = 1.5;
/** BM25 Okapi length normalisation, rank_bm25's default. App. E, "BM25 parameters". */
export const BM25_B = 0.75;
/**
 * rank_bm25 BM25Okapi's IDF floor: a term in more than half of the documents (negative IDF) gets
 * epsilon × average IDF instead. rank_bm25's default, which App. E uses unchanged.
 */
export const BM25_EPSILON = 0.25;
/** The path-token index's scores are added to the content scores with this weight. App. E, "Path signal". */
export const PATH_INDEX_WEIGHT = 2;
/** Files returned per query. App. E, "Top-K selection" (K = 2 matches CodeGrep v3's 1.31 files). */
export const DEFAULT_TOP_K = 2;

/**
 * Directories never indexed, at any depth. App. E, "Corpus": __pycache__/, virtual environments (venv/,
 * .venv/, env/) and build artefacts (build/, dist/, .eggs/). `.git` is added: it is not source and a
 * worktree's `.git` is a file anyway.
 */
export const SKIPPED_DIRECTORIES: readonly string[] = ['__pycache__', 'venv', '.venv', 'env', 'build', 'dist', '.eggs', '.git'];
/** Test directories, indexed by default and skipped when tests are excluded. App. E, "Test-directory scope". */
export const TEST_DIRECTORIES: readonly string[] = ['tests', 'test'];
/** "the target repository's application Python files". App. E, "Corpus". */
export const INDEXED_EXTENSIONS: readonly string[] = ['.py'];

/** Files larger than this are skipped (generated tables, vendored blobs): not application source. */
export const DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024;
/** A NUL byte within this many leading bytes marks a file as binary (git's heuristic). */
export const BINARY_SNIFF_BYTES = 8000;
