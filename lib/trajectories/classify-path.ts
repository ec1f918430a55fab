/**
 * Stage 1 keeps only source files: "discard directories, documentation (README.md, issue.md), and extensionless
 * files" (CodeGrep §3.4). docs/design.md "Mining" spells documentation out as README*, issue.md, *.md, *.rst, and *.txt under
 * docs. Decided here: README* and issue.md anywhere (any case), *.md and *.rst anywhere, *.txt only below a
 * directory named doc or docs (requirements.txt, CMakeLists.txt and test data stay source).
 */
export type ViewedPathKind = 'file' | 'directory' | 'documentation' | 'extensionless';

/** str_replace_editor's answer to viewing a directory (OpenHands). */
const DIRECTORY_LISTING = /^Here's the files and directories up to \d+ levels? deep in /;

/**
 * @param rawPath the path as the agent wrote it (a trailing `/` marks a directory)
 * @param relativePath the normalised repository-relative path ('' = the checkout root)
 * @param observation the tool's answer to this view, when there is one
 */
export function classifyViewedPath(rawPath: string, relativePath: string, observation: string | undefined): ViewedPathKind {
  if (relativePath === '' || rawPath.trimEnd().endsWith('/')) return 'directory';
  if (observation !== undefined && DIRECTORY_LISTING.test(observation)) return 'directory';
  const slash = relativePath.lastIndexOf('/');
  const base = relativePath.slice(slash + 1);
  const lowerBase = base.toLowerCase();
  const dot = base.lastIndexOf('.');
  const extension = dot > 0 ? lowerBase.slice(dot + 1) : '';
  if (lowerBase.startsWith('readme') || lowerBase === 'issue.md') return 'documentation';
  if (extension === 'md' || extension === 'rst') return 'documentation';
  if (extension === 'txt' && isUnderDocs(relativePath.slice(0, Math.max(slash, 0)))) return 'documentation';
  // A dotfile (.gitignore) or a name ending in a dot has no extension either.
  if (extension === '') return 'extensionless';
  return 'file';
}

function isUnderDocs(directory: string): boolean {
  return directory.split('/').some((segment) => segment.toLowerCase() === 'doc' || segment.toLowerCase() === 'docs');
}
