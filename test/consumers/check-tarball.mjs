/**
 * Checks an unpacked herd-guard tarball the way a consumer's tools read it: every entry point of
 * the exports map exists with its declarations, and every source map (of the JavaScript and of the
 * declarations) points at files that are in the tarball or carries their content.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/** Throws one error listing every problem found in the package unpacked at `packageDir`. */
export function checkUnpackedPackage(packageDir) {
  const problems = [];
  const manifest = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'));
  for (const target of exportTargets(manifest.exports)) {
    if (!existsSync(join(packageDir, target)))
      problems.push(`exports names ${target}, which is not in the tarball`);
  }
  const files = listFiles(packageDir);
  const emitted = files.filter((file) => /\.(js|d\.ts)$/.test(file) && file.startsWith('dist/'));
  if (emitted.length === 0)
    problems.push('the tarball has no dist/ (was the package built before packing?)');
  for (const file of emitted) problems.push(...checkSourceMapComment(packageDir, file));
  for (const file of files.filter((name) => name.endsWith('.map')))
    problems.push(...checkSourceMap(packageDir, file));
  if (problems.length > 0)
    throw new Error(`the packed package has problems:\n  ${problems.join('\n  ')}`);
  return { files: files.length, maps: files.filter((name) => name.endsWith('.map')).length };
}

/** Every file path named anywhere in an exports map (conditions nest). */
function exportTargets(exportsField) {
  if (typeof exportsField === 'string') return [exportsField];
  if (exportsField === null || typeof exportsField !== 'object') return [];
  return Object.values(exportsField).flatMap(exportTargets);
}

function checkSourceMapComment(packageDir, file) {
  const text = readFileSync(join(packageDir, file), 'utf8');
  const match = /\/\/# sourceMappingURL=(\S+)\s*$/.exec(text);
  if (match === null) return file.endsWith('.d.ts') ? [] : [`${file} has no sourceMappingURL`];
  const mapPath = join(dirname(join(packageDir, file)), match[1]);
  return existsSync(mapPath)
    ? []
    : [`${file} names the source map ${match[1]}, which is not in the tarball`];
}

function checkSourceMap(packageDir, file) {
  const map = JSON.parse(readFileSync(join(packageDir, file), 'utf8'));
  const base = resolve(dirname(join(packageDir, file)), map.sourceRoot ?? '');
  const problems = [];
  map.sources.forEach((source, index) => {
    if (typeof map.sourcesContent?.[index] === 'string') return;
    const sourcePath = resolve(base, source);
    const inside = !relative(packageDir, sourcePath).startsWith('..');
    if (!inside || !existsSync(sourcePath)) {
      problems.push(
        `${file} points at ${source}, which is not in the tarball and has no sourcesContent`,
      );
    }
  });
  return problems;
}

function listFiles(root, dir = root) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory()
      ? listFiles(root, path)
      : [relative(root, path).split('\\').join('/')];
  });
}
